/*!
The simulator crate's errors: one enum, mapped once at the Python boundary to
`cachecolor.ConfigError` / `cachecolor.TraceError` / `cachecolor.SimulationError`.

A config error names the field (dotted path, e.g. `levels[1].ways`) and what is allowed; a trace
error names the byte offset where the problem was found, so a user can tell a truncated file from
a corrupt block.
*/
use std::fmt;

/// An invalid configuration: which field, and what was wrong with it / what is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub field: String,
    pub message: String,
}

impl ConfigError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

/// A trace that cannot be read: where (byte offset into the file, when known) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceError {
    /// Byte offset in the (compressed) file at which the problem was detected.
    pub offset: Option<u64>,
    pub message: String,
}

impl TraceError {
    pub fn at(offset: u64, message: impl Into<String>) -> Self {
        TraceError {
            offset: Some(offset),
            message: message.into(),
        }
    }
    pub fn new(message: impl Into<String>) -> Self {
        TraceError {
            offset: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.offset {
            Some(o) => write!(f, "at byte offset {o}: {}", self.message),
            None => write!(f, "{}", self.message),
        }
    }
}

impl std::error::Error for TraceError {}

/// Every error the simulator library can return.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid configuration: {0}")]
    Config(#[from] ConfigError),
    #[error("bad trace: {0}")]
    Trace(#[from] TraceError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
