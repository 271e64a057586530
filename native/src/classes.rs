//! Nodes in the same scoring state (streams/core/scheduler.py, `_node_classes`).
//!
//! Why: a large cluster holds many identical servers, and a node-local policy scores
//! identical ones identically, so the scheduler scores one node of each class and
//! copies the result. Grouping 20,000 nodes took numpy a hash, a sort and a check of
//! every column, about 2 ms, which was the cost of every placement of a new task shape
//! at 100,000 GPUs (the placement p99). Here it is one pass with a hash map over each
//! node's exact columns: no hash collision to fall back from, and the classes come in
//! the order their first node appears.

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use rustc_hash::FxHashMap;

type Classes<'py> = (Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<i64>>);

/// (the first node of each class, the class of each node) of the slots `idx`, where two
/// nodes are of one class when their model, free CPU and memory, health, GPU count, free
/// share of every GPU and tag counts are all equal.
#[allow(clippy::too_many_arguments)]
#[pyfunction]
pub fn node_classes<'py>(
    py: Python<'py>,
    idx: PyReadonlyArray1<i64>,
    model: PyReadonlyArray1<i64>,
    cpu_free: PyReadonlyArray1<i64>,
    mem_free: PyReadonlyArray1<i64>,
    healthy: PyReadonlyArray1<bool>,
    gpu_count: PyReadonlyArray1<i64>,
    gpu_free: PyReadonlyArray2<i64>,
    tag_count: PyReadonlyArray2<i64>,
) -> PyResult<Classes<'py>> {
    let idx = idx.as_array();
    let (model, cpu, mem) = (model.as_array(), cpu_free.as_array(), mem_free.as_array());
    let (healthy, count) = (healthy.as_array(), gpu_count.as_array());
    let (gpus, tags) = (gpu_free.as_array(), tag_count.as_array());
    let rows = model.len().min(cpu.len()).min(mem.len()).min(healthy.len()).min(count.len());
    let rows = rows.min(gpus.nrows()).min(tags.nrows());
    let width = 5 + gpus.ncols() + tags.ncols();
    let mut keys: Vec<i64> = Vec::with_capacity(idx.len() * width);
    for &v in idx.iter() {
        if v < 0 || v as usize >= rows {
            return Err(PyValueError::new_err(format!(
                "node slot {v} is outside the state's arrays of {rows} node slots"
            )));
        }
        let v = v as usize;
        keys.extend([model[v], cpu[v], mem[v], i64::from(healthy[v]), count[v]]);
        keys.extend(gpus.row(v).iter());
        keys.extend(tags.row(v).iter());
    }
    let mut class_of: FxHashMap<&[i64], i64> = FxHashMap::default();
    let (mut reps, mut inverse) = (Vec::new(), Vec::with_capacity(idx.len()));
    for (j, key) in keys.chunks_exact(width).enumerate() {
        let next = reps.len() as i64;
        let class = *class_of.entry(key).or_insert(next);
        if class == next {
            reps.push(idx[j]);
        }
        inverse.push(class);
    }
    Ok((reps.into_pyarray(py), inverse.into_pyarray(py)))
}
