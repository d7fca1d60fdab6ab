/*!
Records held as columns (one array per field), as NumPy hands them over: `RecordColumns`
borrows the arrays, checks them once (lengths, kinds, sizes) and turns ranges of them into
records.
*/
use super::{Kind, Record};

/// Borrowed columns of records. Absent columns take the defaults: load, 1 byte, thread 0,
/// instruction count 0, not privileged.
#[derive(Debug, Clone, Copy)]
pub struct RecordColumns<'a> {
    addr: &'a [u64],
    kind: Option<&'a [u8]>,
    size: Option<&'a [u16]>,
    thread: Option<&'a [u32]>,
    icount: Option<&'a [u32]>,
    privileged: Option<&'a [u8]>,
    /// Syscall identities (`Record::syscall`), given with `with_syscalls`.
    syscall: Option<&'a [u32]>,
}

/// A column that does not fit: its name and what is wrong, for the caller's error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnError {
    pub column: &'static str,
    pub message: String,
}

impl<'a> RecordColumns<'a> {
    /// Check every column against `addr`'s length, kinds against 0..=3 and sizes against 0.
    pub fn new(
        addr: &'a [u64],
        kind: Option<&'a [u8]>,
        size: Option<&'a [u16]>,
        thread: Option<&'a [u32]>,
        icount: Option<&'a [u32]>,
        privileged: Option<&'a [u8]>,
    ) -> Result<Self, ColumnError> {
        let n = addr.len();
        let check_len = |column: &'static str, len: Option<usize>| match len {
            Some(len) if len != n => Err(ColumnError {
                column,
                message: format!("{column} has {len} elements but addresses has {n}"),
            }),
            _ => Ok(()),
        };
        check_len("kinds", kind.map(<[u8]>::len))?;
        check_len("sizes", size.map(<[u16]>::len))?;
        check_len("threads", thread.map(<[u32]>::len))?;
        check_len("icounts", icount.map(<[u32]>::len))?;
        check_len("privileged", privileged.map(<[u8]>::len))?;
        if let Some((i, &bad)) = kind
            .unwrap_or_default()
            .iter()
            .enumerate()
            .find(|(_, &v)| Kind::from_u8(v).is_none())
        {
            return Err(ColumnError {
                column: "kinds",
                message: format!(
                    "kinds[{i}] = {bad}: expected 0 (load), 1 (store), 2 (ifetch) or 3 (modify)"
                ),
            });
        }
        if let Some(i) = size.unwrap_or_default().iter().position(|&v| v == 0) {
            return Err(ColumnError {
                column: "sizes",
                message: format!("sizes[{i}] = 0: a reference is at least 1 byte"),
            });
        }
        Ok(RecordColumns {
            addr,
            kind,
            size,
            thread,
            icount,
            privileged,
            syscall: None,
        })
    }

    /// The same columns with a syscall-identity column (`Record::syscall`; 0 = none), checked
    /// against the addresses' length.
    pub fn with_syscalls(self, syscall: Option<&'a [u32]>) -> Result<Self, ColumnError> {
        if let Some(c) = syscall {
            if c.len() != self.addr.len() {
                return Err(ColumnError {
                    column: "syscalls",
                    message: format!(
                        "syscalls has {} elements but addresses has {}",
                        c.len(),
                        self.addr.len()
                    ),
                });
            }
        }
        Ok(RecordColumns { syscall, ..self })
    }

    /// Records `start..end` appended to `out`, column by column (a tight loop per given
    /// column; measured faster than building each record from every column in one pass).
    pub fn extend_records(&self, start: usize, end: usize, out: &mut Vec<Record>) {
        let from = out.len();
        out.extend(self.addr[start..end].iter().map(|&addr| Record {
            addr,
            thread: 0,
            icount: 0,
            size: 1,
            kind: Kind::Load,
            privileged: false,
            syscall: 0,
        }));
        let recs = &mut out[from..];
        let part = |c: Option<&'a [u32]>| c.map(|c| &c[start..end]);
        set_each(recs, part(self.thread), |r, v| r.thread = v);
        set_each(recs, part(self.icount), |r, v| r.icount = v);
        set_each(recs, self.size.map(|c| &c[start..end]), |r, v| r.size = v);
        set_each(recs, self.kind.map(|c| &c[start..end]), |r, v| {
            r.kind = kind_of(v)
        });
        set_each(recs, self.privileged.map(|c| &c[start..end]), |r, v| {
            r.privileged = v != 0
        });
        set_each(recs, part(self.syscall), |r, v| r.syscall = v);
    }

    pub fn len(&self) -> usize {
        self.addr.len()
    }

    /// The address and size columns (sizes empty when not given), when no other column is
    /// given: every record is then a load by thread 0.
    pub fn addresses_and_sizes(&self) -> Option<(&'a [u64], &'a [u16])> {
        if self.kind.is_some()
            || self.thread.is_some()
            || self.icount.is_some()
            || self.privileged.is_some()
            || self.syscall.is_some()
        {
            return None;
        }
        Some((self.addr, self.size.unwrap_or_default()))
    }

    pub fn is_empty(&self) -> bool {
        self.addr.is_empty()
    }

    /// Record `i`.
    #[inline(always)]
    pub fn get(&self, i: usize) -> Record {
        Record {
            addr: self.addr[i],
            thread: self.thread.map_or(0, |c| c[i]),
            icount: self.icount.map_or(0, |c| c[i]),
            size: self.size.map_or(1, |c| c[i]),
            kind: self.kind.map_or(Kind::Load, |c| kind_of(c[i])),
            privileged: self.privileged.is_some_and(|c| c[i] != 0),
            syscall: self.syscall.map_or(0, |c| c[i]),
        }
    }

    /// The columns of records `start..end`.
    pub fn slice(&self, start: usize, end: usize) -> RecordColumns<'a> {
        RecordColumns {
            addr: &self.addr[start..end],
            kind: self.kind.map(|c| &c[start..end]),
            size: self.size.map(|c| &c[start..end]),
            thread: self.thread.map(|c| &c[start..end]),
            icount: self.icount.map(|c| &c[start..end]),
            privileged: self.privileged.map(|c| &c[start..end]),
            syscall: self.syscall.map(|c| &c[start..end]),
        }
    }
}

/// Apply `set` to each record with the matching element of `column`, if the column was given.
fn set_each<T: Copy>(recs: &mut [Record], column: Option<&[T]>, set: impl Fn(&mut Record, T)) {
    if let Some(c) = column {
        for (r, &v) in recs.iter_mut().zip(c) {
            set(r, v);
        }
    }
}

/// Kinds were checked in `new`; an unknown value cannot occur.
#[inline(always)]
fn kind_of(v: u8) -> Kind {
    Kind::from_u8(v).unwrap_or(Kind::Load)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_give_the_records_they_describe() {
        let addr = [0x1000u64, 0x2000, 0x3008];
        let kind = [0u8, 1, 3];
        let size = [8u16, 4, 64];
        let thread = [0u32, 1, 2];
        let privileged = [0u8, 1, 0];
        let c = RecordColumns::new(
            &addr,
            Some(&kind),
            Some(&size),
            Some(&thread),
            None,
            Some(&privileged),
        )
        .unwrap();
        let mut v = Vec::new();
        c.extend_records(0, 3, &mut v);
        for (i, r) in v.iter().enumerate() {
            assert_eq!(*r, c.get(i));
        }
        assert_eq!(v[2].kind, Kind::Modify);
        assert!(v[1].privileged && v[1].kind == Kind::Store && v[1].size == 4);
        assert_eq!(c.slice(1, 3).get(0), v[1]);
        let plain = RecordColumns::new(&addr, None, None, None, None, None).unwrap();
        let r = plain.get(2);
        assert_eq!(
            (r.addr, r.size, r.kind, r.thread),
            (0x3008, 1, Kind::Load, 0)
        );
    }

    #[test]
    fn syscall_column_is_carried_and_checked() {
        let addr = [1u64, 2, 3];
        let sys = [0u32, 77, 0];
        let c = RecordColumns::new(&addr, None, None, None, None, None)
            .unwrap()
            .with_syscalls(Some(&sys))
            .unwrap();
        assert!(c.addresses_and_sizes().is_none());
        let mut v = Vec::new();
        c.extend_records(0, 3, &mut v);
        assert_eq!(v.iter().map(|r| r.syscall).collect::<Vec<_>>(), sys);
        assert_eq!(c.get(1).syscall, 77);
        assert_eq!(c.slice(1, 3).get(0).syscall, 77);
        let e = RecordColumns::new(&addr, None, None, None, None, None)
            .unwrap()
            .with_syscalls(Some(&[1]))
            .unwrap_err();
        assert_eq!(e.column, "syscalls");
    }

    #[test]
    fn bad_columns_are_named() {
        let addr = [1u64, 2];
        let e = RecordColumns::new(&addr, Some(&[0, 7]), None, None, None, None).unwrap_err();
        assert_eq!(e.column, "kinds");
        assert!(e.message.contains("kinds[1] = 7"), "{}", e.message);
        let e = RecordColumns::new(&addr, None, Some(&[1]), None, None, None).unwrap_err();
        assert!(e
            .message
            .contains("sizes has 1 elements but addresses has 2"));
        let e = RecordColumns::new(&addr, None, Some(&[1, 0]), None, None, None).unwrap_err();
        assert!(e.message.contains("sizes[1] = 0"));
    }
}
