//! Errors carry an MPI error class so every layer (and the Python API) can
//! report them the way MPI does.

use std::fmt;

/// MPI error classes, numbered as MPICH numbers them so that programs that
/// compare against mpi4py's constants keep working.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum ErrorClass {
    Buffer = 1,
    Count = 2,
    Type = 3,
    Tag = 4,
    Comm = 5,
    Rank = 6,
    Root = 7,
    Group = 8,
    Op = 9,
    Arg = 12,
    Unknown = 13,
    Truncate = 14,
    Other = 15,
    Intern = 16,
    Request = 19,
    /// One-sided communication (RMA windows), MPICH's numbers.
    Win = 45,
    LockType = 47,
    RmaConflict = 49,
    RmaSync = 50,
    RmaRange = 55,
    RmaAttach = 56,
    /// A peer's endpoint or instance is gone (MPICH's MPIX_ERR_PROC_FAILED).
    ProcFailed = 101,
    /// An operation did not complete within its time limit (mpiws extension).
    Timeout = 200,
    /// The instance was cancelled through the service interface (mpiws extension).
    Cancelled = 201,
}

impl ErrorClass {
    pub fn code(self) -> i32 {
        self as i32
    }

    pub fn from_code(code: i64) -> ErrorClass {
        match code {
            1 => ErrorClass::Buffer,
            2 => ErrorClass::Count,
            3 => ErrorClass::Type,
            4 => ErrorClass::Tag,
            5 => ErrorClass::Comm,
            6 => ErrorClass::Rank,
            7 => ErrorClass::Root,
            8 => ErrorClass::Group,
            9 => ErrorClass::Op,
            12 => ErrorClass::Arg,
            13 => ErrorClass::Unknown,
            14 => ErrorClass::Truncate,
            15 => ErrorClass::Other,
            16 => ErrorClass::Intern,
            19 => ErrorClass::Request,
            45 => ErrorClass::Win,
            47 => ErrorClass::LockType,
            49 => ErrorClass::RmaConflict,
            50 => ErrorClass::RmaSync,
            55 => ErrorClass::RmaRange,
            56 => ErrorClass::RmaAttach,
            101 => ErrorClass::ProcFailed,
            200 => ErrorClass::Timeout,
            201 => ErrorClass::Cancelled,
            _ => ErrorClass::Unknown,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ErrorClass::Buffer => "MPI_ERR_BUFFER",
            ErrorClass::Count => "MPI_ERR_COUNT",
            ErrorClass::Type => "MPI_ERR_TYPE",
            ErrorClass::Tag => "MPI_ERR_TAG",
            ErrorClass::Comm => "MPI_ERR_COMM",
            ErrorClass::Rank => "MPI_ERR_RANK",
            ErrorClass::Root => "MPI_ERR_ROOT",
            ErrorClass::Group => "MPI_ERR_GROUP",
            ErrorClass::Op => "MPI_ERR_OP",
            ErrorClass::Arg => "MPI_ERR_ARG",
            ErrorClass::Unknown => "MPI_ERR_UNKNOWN",
            ErrorClass::Truncate => "MPI_ERR_TRUNCATE",
            ErrorClass::Other => "MPI_ERR_OTHER",
            ErrorClass::Intern => "MPI_ERR_INTERN",
            ErrorClass::Request => "MPI_ERR_REQUEST",
            ErrorClass::Win => "MPI_ERR_WIN",
            ErrorClass::LockType => "MPI_ERR_LOCKTYPE",
            ErrorClass::RmaConflict => "MPI_ERR_RMA_CONFLICT",
            ErrorClass::RmaSync => "MPI_ERR_RMA_SYNC",
            ErrorClass::RmaRange => "MPI_ERR_RMA_RANGE",
            ErrorClass::RmaAttach => "MPI_ERR_RMA_ATTACH",
            ErrorClass::ProcFailed => "MPIX_ERR_PROC_FAILED",
            ErrorClass::Timeout => "MPIWS_ERR_TIMEOUT",
            ErrorClass::Cancelled => "MPIWS_ERR_CANCELLED",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub class: ErrorClass,
    pub message: String,
}

impl Error {
    pub fn new(class: ErrorClass, message: impl Into<String>) -> Self {
        Error { class, message: message.into() }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.class.name(), self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// Shorthand used throughout: `err(ErrorClass::Rank, "...")`.
pub fn err<T>(class: ErrorClass, message: impl Into<String>) -> Result<T> {
    Err(Error::new(class, message))
}
