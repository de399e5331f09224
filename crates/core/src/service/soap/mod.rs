//! SOAP 1.2 with WSDL: the face the systems mpiws descends from spoke.
//! [`wsdl`] generates the WSDL of each deployed program (`GET
//! /programs/{name}?wsdl`) and of the service interface (`GET /?wsdl`);
//! [`program`] answers a program's operations (`POST /programs/{name}`),
//! [`services`] the service interface's (`POST /`), [`rank`] a running
//! rank's `store` and `bStore` (`POST /domains/{domain}/ranks/{rank}`):
//! [`envelope`] reads the request (SOAP 1.2, plain or MTOM) and writes
//! answers and faults, [`mtom`] reads and writes MTOM packages as they
//! stream, [`receive`] reads a program's request as it arrives (its files
//! to disk), [`inputs`] makes the operation's element the spawn's inputs,
//! [`xml`] is the one XML parser (no DTD, no entities).

pub mod envelope;
pub mod inputs;
pub mod mtom;
pub mod program;
pub mod rank;
pub mod receive;
pub mod services;
pub mod wsdl;
pub mod xml;
