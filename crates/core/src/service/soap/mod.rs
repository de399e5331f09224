//! SOAP 1.2 with WSDL: the face the systems mpiws descends from spoke.
//! [`wsdl`] generates the WSDL of each deployed program (`GET
//! /programs/{name}?wsdl`) from its interface.

pub mod wsdl;
