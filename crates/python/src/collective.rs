//! Python arguments of a collective call -> the core's `Call`.

use bytes::Bytes;
use mpiws_core::ErrorClass;
use mpiws_core::{Call, Edge, Op};
use pyo3::prelude::*;

use crate::buffers::to_bytes;
use crate::errors::{mpi_err, IntoPy};

/// A topology's edges: (neighbour rank, key) pairs.
pub type Edges = Option<Vec<(i64, u32)>>;

/// The core checks what it takes (roots, block counts, neighbours):
/// nothing here but conversions.
#[allow(clippy::too_many_arguments)]
pub fn call(
    name: &str,
    root: i64,
    data: Option<Bound<'_, PyAny>>,
    blocks: Option<Vec<Bound<'_, PyAny>>>,
    op: Option<(String, String)>,
    counts: Option<Vec<usize>>,
    length: Option<usize>,
    sources: Edges,
    destinations: Edges,
) -> PyResult<Call> {
    let data = data.as_ref().map(to_bytes).transpose()?;
    let blocks = blocks.map(|bs| bs.iter().map(to_bytes).collect::<PyResult<Vec<Bytes>>>()).transpose()?;
    let op = op.map(|(kind, dtype)| Op::new(&kind, &dtype)).transpose().py_err()?;
    let need = |what: &str| mpi_err(ErrorClass::Arg, format!("{name} needs {what}"));
    let data_or_empty = || data.clone().unwrap_or_default();
    Ok(match name {
        "barrier" => Call::Barrier,
        "bcast" => Call::Bcast { root, data, len: length },
        "gather" => Call::Gather { root, data: data_or_empty() },
        "scatter" => Call::Scatter { root, blocks },
        "allgather" => Call::Allgather { data: data_or_empty() },
        "alltoall" => Call::Alltoall { blocks: blocks.ok_or_else(|| need("blocks"))? },
        "reduce" => Call::Reduce { root, data: data_or_empty(), op: op.ok_or_else(|| need("an op"))? },
        "allreduce" => Call::Allreduce { data: data_or_empty(), op: op.ok_or_else(|| need("an op"))? },
        "reduce_scatter" => Call::ReduceScatter {
            data: data_or_empty(),
            counts: counts.ok_or_else(|| need("counts"))?,
            op: op.ok_or_else(|| need("an op"))?,
        },
        "scan" => Call::Scan { data: data_or_empty(), op: op.ok_or_else(|| need("an op"))? },
        "exscan" => Call::Exscan { data: data_or_empty(), op: op.ok_or_else(|| need("an op"))? },
        "neighbor" => Call::Neighbor {
            sources: edges(sources.ok_or_else(|| need("sources"))?),
            destinations: edges(destinations.ok_or_else(|| need("destinations"))?),
            blocks: blocks.ok_or_else(|| need("blocks"))?,
        },
        _ => return Err(mpi_err(ErrorClass::Arg, format!("unknown collective '{name}'"))),
    })
}

fn edges(pairs: Vec<(i64, u32)>) -> Vec<Edge> {
    pairs.into_iter().map(|(rank, key)| Edge { rank, key }).collect()
}

/// `inoutbuf = inbuf op inoutbuf` with a builtin op on typed buffers
/// (`Op.Reduce_local`), the GIL released for the arithmetic.
#[pyfunction]
pub fn reduce_local(py: Python<'_>, op: (String, String), inbuf: &Bound<'_, PyAny>, inoutbuf: &Bound<'_, PyAny>) -> PyResult<()> {
    let op = Op::new(&op.0, &op.1).py_err()?;
    let left = to_bytes(inbuf)?;
    let mut right = crate::buffers::Dest::get(inoutbuf)?;
    py.detach(|| op.apply(&left, right.slice())).py_err()
}
