//! `mpiws._core`: the Python face of the Rust core. Every class here wraps
//! one core type: it converts arguments and results, holds the Python
//! buffers a pending operation reads or fills, and waits in slices
//! (`wait.rs`) so that a blocking call releases the GIL and still sees
//! Ctrl-C; the rules (matching, timeouts, collectives) are the core's.

use pyo3::prelude::*;

mod buffers;
mod client;
mod collective;
mod comm;
mod datatype;
mod endpoint;
mod errors;
mod instance;
mod jobs;
mod memory;
mod request;
mod wait;
mod window;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<endpoint::Endpoint>()?;
    m.add_class::<instance::Instance>()?;
    m.add_class::<comm::Comm>()?;
    m.add_class::<request::Request>()?;
    m.add_class::<request::Message>()?;
    m.add_class::<request::Events>()?;
    m.add_class::<request::View>()?;
    m.add_class::<memory::Memory>()?;
    m.add_class::<window::Window>()?;
    m.add_class::<datatype::Layout>()?;
    m.add_class::<client::DomainClient>()?;
    m.add_class::<jobs::JobsClient>()?;
    m.add_function(wrap_pyfunction!(errors::set_error_type, m)?)?;
    m.add_function(wrap_pyfunction!(buffers::set_plain_formats, m)?)?;
    m.add("Error", m.py().get_type::<errors::CoreError>())?;
    m.add_function(wrap_pyfunction!(endpoint::sandbox_begin, m)?)?;
    m.add_function(wrap_pyfunction!(endpoint::sandbox_report, m)?)?;
    m.add_function(wrap_pyfunction!(request::wait_any, m)?)?;
    m.add_function(wrap_pyfunction!(collective::reduce_local, m)?)?;
    m.add_function(wrap_pyfunction!(client::rendezvous_register, m)?)?;
    m.add_function(wrap_pyfunction!(client::parse_url, m)?)?;
    m.add_function(wrap_pyfunction!(client::parse_port, m)?)?;
    m.add_function(wrap_pyfunction!(endpoint::exit_on_signals, m)?)?;
    m.add_function(wrap_pyfunction!(endpoint::cwl_eval, m)?)?;
    m.add_function(wrap_pyfunction!(endpoint::endpoint_settings, m)?)?;
    m.add("ANY_SOURCE", mpiws_core::ANY_SOURCE)?;
    m.add("ANY_TAG", mpiws_core::ANY_TAG)?;
    m.add("PROC_NULL", mpiws_core::PROC_NULL)?;
    m.add("TAG_UB", mpiws_core::wire::frame::TAG_UB)?;
    let algorithms = pyo3::types::PyDict::new(m.py());
    for (name, algos) in mpiws_core::ALGORITHMS {
        algorithms.set_item(name, algos.to_vec())?;
    }
    m.add("ALGORITHMS", algorithms)?;
    m.add("VERSION", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
