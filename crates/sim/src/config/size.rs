/*!
Byte sizes in configs: an integer (bytes) or a string with a binary unit, `"32KiB"`, `"1 MiB"`,
`"2M"` (K/M/G are binary here, as cache sizes always are). Serialised back as an integer so the
effective config written beside results is unambiguous.
*/
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// A size in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Size(pub u64);

impl Size {
    pub fn bytes(self) -> u64 {
        self.0
    }

    /// Parse `"48KiB"`, `"1 MiB"`, `"32M"`, `"4096"`, `"0x1000"`.
    pub fn parse(s: &str) -> Result<Size, String> {
        let t = s.trim();
        if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            return u64::from_str_radix(hex, 16)
                .map(Size)
                .map_err(|_| format!("`{s}` is not a size (hex digits expected after 0x)"));
        }
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let n: u64 = num.parse().map_err(|_| {
            format!("`{s}` is not a size: use bytes (e.g. 4096) or a number with KiB, MiB, GiB")
        })?;
        let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" | "kb" | "kib" => 1 << 10,
            "m" | "mb" | "mib" => 1 << 20,
            "g" | "gb" | "gib" => 1 << 30,
            "t" | "tb" | "tib" => 1 << 40,
            other => {
                return Err(format!(
                    "`{s}` has unknown unit `{other}`: allowed units are B, KiB, MiB, GiB, TiB (K, M, G also mean binary units)"
                ))
            }
        };
        n.checked_mul(mult)
            .map(Size)
            .ok_or_else(|| format!("`{s}` is too large"))
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        for (unit, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)] {
            if b >= 1 << shift && b.is_multiple_of(1 << shift) {
                return write!(f, "{}{unit}", b >> shift);
            }
        }
        write!(f, "{b}B")
    }
}

impl Serialize for Size {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Size;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a size: bytes as an integer, or a string such as \"32KiB\"")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Size, E> {
                Ok(Size(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Size, E> {
                u64::try_from(v)
                    .map(Size)
                    .map_err(|_| E::custom(format!("size {v} is negative")))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Size, E> {
                Size::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(Size::parse("48KiB").unwrap(), Size(48 << 10));
        assert_eq!(Size::parse("1 MiB").unwrap(), Size(1 << 20));
        assert_eq!(Size::parse("32M").unwrap(), Size(32 << 20));
        assert_eq!(Size::parse("4096").unwrap(), Size(4096));
        assert_eq!(Size::parse("0x200000000").unwrap(), Size(0x2_0000_0000));
        assert!(Size::parse("12 furlongs")
            .unwrap_err()
            .contains("allowed units"));
        assert!(Size::parse("KiB").is_err());
        assert_eq!(Size(48 << 10).to_string(), "48KiB");
    }
}
