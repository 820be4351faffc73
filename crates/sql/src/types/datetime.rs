//! DATETIME and TIMESTAMP values: calendar checks, the packed form rows and
//! keys store, parsing and the text form.

use std::fmt;

pub(crate) fn is_leap(year: u16) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

pub(crate) fn days_in_month(year: u16, month: u8) -> u8 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(year) => 29,
        2 => 28,
        _ => 0,
    }
}

/// A DATETIME or TIMESTAMP value. Stored values are calendar-valid (see
/// [`DateTime::is_valid`]) with `micro == 0` (fsp 0).
///
/// The fields are declared from the most significant to the least, so the
/// derived `Ord` (which compares fields in declaration order, like a tuple)
/// is the chronological order; for valid datetimes it is also the order of
/// the packed form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DateTime {
    pub year: u16,
    pub month: u8,
    pub day: u8,
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
    pub micro: u32,
}

impl DateTime {
    /// A calendar-valid datetime: years 1..=9999, no zero dates.
    pub(crate) fn is_valid(&self) -> bool {
        (1..=9999).contains(&self.year)
            && (1..=12).contains(&self.month)
            && self.day >= 1
            && self.day <= days_in_month(self.year, self.month)
            && self.hour < 24
            && self.minute < 60
            && self.second < 60
            && self.micro < 1_000_000
    }

    /// The packed form: year(14) month(4) day(5) hour(5) minute(6) second(6)
    /// micro(20) from the most significant bit down; 60 bits, so its order as
    /// an integer is the order of the datetimes.
    pub(crate) fn pack(&self) -> u64 {
        ((self.year as u64) << 46)
            | ((self.month as u64) << 42)
            | ((self.day as u64) << 37)
            | ((self.hour as u64) << 32)
            | ((self.minute as u64) << 26)
            | ((self.second as u64) << 20)
            | self.micro as u64
    }

    /// The inverse of [`DateTime::pack`]; `None` for bits outside the 60
    /// used. The result is not validated.
    pub(crate) fn unpack(p: u64) -> Option<DateTime> {
        if p >> 60 != 0 {
            return None;
        }
        Some(DateTime {
            year: (p >> 46) as u16,
            month: ((p >> 42) & 0xF) as u8,
            day: ((p >> 37) & 0x1F) as u8,
            hour: ((p >> 32) & 0x1F) as u8,
            minute: ((p >> 26) & 0x3F) as u8,
            second: ((p >> 20) & 0x3F) as u8,
            micro: (p & 0xF_FFFF) as u32,
        })
    }

    /// Parses 'YYYY-MM-DD[( |T)HH:MM:SS[.f+]]' (1 or 2 digit month, day and
    /// time fields); fractional digits beyond 6 are ignored. The result is
    /// not validated.
    pub(crate) fn parse(s: &[u8]) -> Option<DateTime> {
        let s = s.trim_ascii();
        let mut i = 0;
        let num = |min: usize, max: usize, i: &mut usize| -> Option<u32> {
            let start = *i;
            let mut v: u32 = 0;
            while *i < s.len() && s[*i].is_ascii_digit() && *i - start < max {
                v = v * 10 + (s[*i] - b'0') as u32;
                *i += 1;
            }
            (*i - start >= min).then_some(v)
        };
        let expect = |c: u8, i: &mut usize| -> Option<()> {
            if *i < s.len() && s[*i] == c {
                *i += 1;
                Some(())
            } else {
                None
            }
        };
        let year = num(4, 4, &mut i)?;
        expect(b'-', &mut i)?;
        let month = num(1, 2, &mut i)?;
        expect(b'-', &mut i)?;
        let day = num(1, 2, &mut i)?;
        let (mut hour, mut minute, mut second, mut micro) = (0, 0, 0, 0);
        if i < s.len() {
            if s[i] != b' ' && s[i] != b'T' {
                return None;
            }
            i += 1;
            hour = num(1, 2, &mut i)?;
            expect(b':', &mut i)?;
            minute = num(1, 2, &mut i)?;
            expect(b':', &mut i)?;
            second = num(1, 2, &mut i)?;
            if i < s.len() {
                expect(b'.', &mut i)?;
                let start = i;
                while i < s.len() && s[i].is_ascii_digit() {
                    if i - start < 6 {
                        micro = micro * 10 + (s[i] - b'0') as u32;
                    }
                    i += 1;
                }
                if i == start {
                    return None;
                }
                for _ in (i - start)..6 {
                    micro *= 10;
                }
            }
        }
        if i != s.len() || hour > 255 || minute > 255 || second > 255 || month > 255 || day > 255 {
            return None;
        }
        Some(DateTime {
            year: year as u16,
            month: month as u8,
            day: day as u8,
            hour: hour as u8,
            minute: minute as u8,
            second: second as u8,
            micro,
        })
    }

    /// Rounds a valid datetime to whole seconds (fsp 0), carrying into the
    /// date; `None` past 9999. Each carry can only follow the one before it,
    /// since every field of a valid datetime is within its range.
    pub(crate) fn round_to_second(mut self) -> Option<DateTime> {
        debug_assert!(self.is_valid());
        if self.micro >= 500_000 {
            self.second += 1;
            if self.second == 60 {
                self.second = 0;
                self.minute += 1;
            }
            if self.minute == 60 {
                self.minute = 0;
                self.hour += 1;
            }
            if self.hour == 24 {
                self.hour = 0;
                self.day += 1;
            }
            if self.day > days_in_month(self.year, self.month) {
                self.day = 1;
                self.month += 1;
            }
            if self.month == 13 {
                self.month = 1;
                self.year += 1;
            }
            if self.year > 9999 {
                return None;
            }
        }
        self.micro = 0;
        Some(self)
    }
}

/// The TIMESTAMP range: '1970-01-01 00:00:01'..='2038-01-19 03:14:07'.
pub(crate) const TIMESTAMP_MIN: DateTime = DateTime {
    year: 1970,
    month: 1,
    day: 1,
    hour: 0,
    minute: 0,
    second: 1,
    micro: 0,
};
pub(crate) const TIMESTAMP_MAX: DateTime = DateTime {
    year: 2038,
    month: 1,
    day: 19,
    hour: 3,
    minute: 14,
    second: 7,
    micro: 0,
};

/// 'YYYY-MM-DD HH:MM:SS', with '.ffffff' only when microseconds are not 0.
impl fmt::Display for DateTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let DateTime {
            year,
            month,
            day,
            hour,
            minute,
            second,
            micro,
        } = *self;
        write!(
            f,
            "{year:04}-{month:02}-{day:02} {hour:02}:{minute:02}:{second:02}"
        )?;
        if micro != 0 {
            write!(f, ".{micro:06}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datetime_pack_order_and_text() {
        let d = DateTime {
            year: 2024,
            month: 2,
            day: 29,
            hour: 12,
            minute: 34,
            second: 56,
            micro: 789,
        };
        // The packed form is what rows and keys store: it must not change.
        assert_eq!(d.pack(), 0x01FA_0BAC_8B80_0315);
        assert_eq!(DateTime::unpack(d.pack()), Some(d));
        assert_eq!(DateTime::unpack(1 << 60), None);
        let later = DateTime {
            second: 57,
            micro: 0,
            ..d
        };
        assert!(d < later && d.pack() < later.pack());
        assert_eq!(d.to_string(), "2024-02-29 12:34:56.000789");
        assert_eq!(later.to_string(), "2024-02-29 12:34:57");
    }
}
