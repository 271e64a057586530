//! FGD's fragmentation measure F(v) (Weng et al., USENIX ATC'23; docs/packing-benchmark.md
//! §4) per node, and F(v') after each option of a placement: the hot path of the `fgd`
//! and `hetsched` placement scores.
//!
//! F(v) is the milli-GPU of node v that each typical task k of the expected mix could not
//! use, weighted by its probability p_k. It is computed from two integer aggregates per
//! (node, k): the number of GPUs with at least m_k free (`cnt_ge`) and the free share on
//! GPUs with less (`frag_lt`). A placement changes them by integers, so F(v') needs no
//! re-scan of the node's GPUs.
//!
//! The floating-point sum is exactly specified: each term is the integer amount times p_k
//! (one IEEE multiplication), added left to right from 0.0 within each of six buckets in
//! typical-task order, then the six bucket totals in bucket order (the bit-exact note of
//! §4). Nothing is fused, reordered or vectorized, so the Python oracle
//! (tests/oracle/fragmentation.py) gives the same bits.

use std::ops::Index;

use numpy::ndarray::{ArrayView1, ArrayView2};
use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::score::Sigmoid;

const MILLI_PER_GPU: i64 = 1000;
/// Row code of a GPU task on the right model with enough GPUs and CPU: the fragment is
/// `frag_lt`; in every other case it is the node's whole idle milli-GPU.
const FRAG_CODE: i64 = 7;
const BUCKETS: usize = 6;
/// Bucket of each row code 8*cpu_only + 4*model_ok + 2*enough_gpus + cpu_ok. Buckets, in
/// summation order: lack-both, lack-GPU, lack-CPU, cpu-task-fits, cpu-task-lacks-CPU,
/// wrong-model.
const BUCKET_OF_CODE: [usize; 16] = [5, 5, 5, 5, 0, 1, 2, 1, 4, 3, 4, 3, 4, 3, 4, 3];

/// The typical tasks k (FGD's expected mix) and which GPU models each accepts.
struct Mix {
    cpu: Vec<i64>,
    gpu: Vec<i64>,
    num: Vec<i64>,
    prob: Vec<f64>,
    /// 8 for a CPU-only typical task, else 0: its part of the row code.
    cpu_only8: Vec<i64>,
    /// Per model column (model id; the last column is "no GPU model"), per k: accepted.
    model_ok: Vec<Vec<bool>>,
}

impl Mix {
    pub(crate) fn k(&self) -> usize {
        self.prob.len()
    }

    /// F of one node state from its aggregates, in the specified order.
    fn ordered_sum(
        &self,
        cpu_free: i64,
        idle: i64,
        code0: &[i64],
        cnt: &[i64],
        frag: &[i64],
    ) -> f64 {
        let mut totals = [0.0f64; BUCKETS];
        for k in 0..self.k() {
            let code = code0[k]
                + i64::from(cpu_free >= self.cpu[k])
                + 2 * i64::from(cnt[k] >= self.num[k]);
            let amount = if code == FRAG_CODE { frag[k] } else { idle };
            totals[BUCKET_OF_CODE[code as usize]] += amount as f64 * self.prob[k];
        }
        let mut f = 0.0f64;
        for t in totals {
            f += t;
        }
        f
    }

    /// The model column of `model` (numpy's negative indexing: -1 is "no GPU model").
    fn column(&self, model: i64) -> PyResult<&[bool]> {
        let cols = self.model_ok.len() as i64;
        let col = if model < 0 { model + cols } else { model };
        if col < 0 || col >= cols {
            return Err(PyValueError::new_err(format!(
                "model id {model} is outside the {cols} model columns of the mix"
            )));
        }
        Ok(&self.model_ok[col as usize])
    }
}

/// F(v) and its aggregates per node, recomputed only for nodes whose version changed.
///
/// Holds one row per node slot of a cluster state: `refresh` brings the rows of the
/// given slots up to the state's versions, `delta` reads them to score options.
#[pyclass(module = "hetsched_core")]
pub struct FragTable {
    mix: Mix,
    version: Vec<i64>,
    cnt_ge: Vec<i64>,
    frag_lt: Vec<i64>,
    code0: Vec<i64>,
    frag: Vec<f64>,
}

impl FragTable {
    fn grow(&mut self, n: usize) {
        if n <= self.version.len() {
            return;
        }
        let k = self.mix.k();
        self.version.resize(n, -1);
        self.frag.resize(n, 0.0);
        self.cnt_ge.resize(n * k, 0);
        self.frag_lt.resize(n * k, 0);
        self.code0.resize(n * k, 0);
    }

    /// The number of typical tasks of the mix.
    pub(crate) fn k(&self) -> usize {
        self.mix.k()
    }

    /// Bring the rows of `slots` (each below `n`) up to `version`.
    pub(crate) fn refresh_slots(
        &mut self,
        n: usize,
        version: ArrayView1<i64>,
        gpu_free: ArrayView2<i64>,
        cpu_free: ArrayView1<i64>,
        model: ArrayView1<i64>,
        slots: impl IntoIterator<Item = usize>,
    ) -> PyResult<()> {
        self.grow(n);
        let mut gpus: Vec<i64> = Vec::with_capacity(gpu_free.ncols());
        for v in slots {
            if self.version[v] == version[v] {
                continue;
            }
            gpus.clear();
            gpus.extend(gpu_free.row(v).iter().copied());
            self.compute_row(v, &gpus, cpu_free[v], model[v])?;
            self.version[v] = version[v];
        }
        Ok(())
    }

    /// Recompute the row of slot `v` from its GPUs' free shares, free CPU and model.
    fn compute_row(&mut self, v: usize, gpus: &[i64], cpu_free: i64, model: i64) -> PyResult<()> {
        let k = self.mix.k();
        let ok = self.mix.column(model)?;
        let base = v * k;
        let mut idle = 0i64;
        for &f in gpus {
            idle += f;
        }
        for (j, &accepts) in ok.iter().enumerate() {
            let m = self.mix.gpu[j];
            let (mut cnt, mut frag) = (0i64, 0i64);
            for &f in gpus {
                if f >= m {
                    cnt += 1;
                } else {
                    frag += f;
                }
            }
            self.cnt_ge[base + j] = cnt;
            self.frag_lt[base + j] = frag;
            self.code0[base + j] = self.mix.cpu_only8[j] + if accepts { 4 } else { 0 };
        }
        self.frag[v] = self.mix.ordered_sum(
            cpu_free,
            idle,
            &self.code0[base..base + k],
            &self.cnt_ge[base..base + k],
            &self.frag_lt[base..base + k],
        );
        Ok(())
    }

    /// The row index of slot `v`, which `refresh` must have computed.
    pub(crate) fn slot(&self, v: i64) -> PyResult<usize> {
        if v < 0 || v as usize >= self.version.len() || self.version[v as usize] < 0 {
            return Err(PyValueError::new_err(format!(
                "node slot {v} has no row in the table (refresh it first)"
            )));
        }
        Ok(v as usize)
    }

    /// F(v) (before) and F(v') (after) of one option on slot `v`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn option(
        &self,
        v: usize,
        cpu_free: i64,
        idle: i64,
        free: i64,
        task: &Task,
        cnt: &mut [i64],
        frag: &mut [i64],
    ) -> (f64, f64) {
        let k = self.mix.k();
        let base = v * k;
        cnt.copy_from_slice(&self.cnt_ge[base..base + k]);
        frag.copy_from_slice(&self.frag_lt[base..base + k]);
        let mut idle_after = idle;
        if task.fractional {
            // The option's GPU goes from `free` to `free - share`: its part of both
            // aggregates changes from what `free` gives to what `free - share` gives.
            let (a, b) = (free, free - task.share);
            for j in 0..k {
                let m = self.mix.gpu[j];
                cnt[j] += i64::from(b >= m) - i64::from(a >= m);
                frag[j] += (if b < m { b } else { 0 }) - (if a < m { a } else { 0 });
            }
            idle_after -= task.share;
        } else if task.num_gpu > 0 {
            // Whole idle GPUs go from 1000 to 0 free: they leave every count (m_k <= 1000)
            // and add nothing to any fragment.
            for c in cnt.iter_mut() {
                *c -= task.num_gpu;
            }
            idle_after -= task.num_gpu * MILLI_PER_GPU;
        }
        let after = self.mix.ordered_sum(
            cpu_free - task.cpu,
            idle_after,
            &self.code0[base..base + k],
            cnt,
            frag,
        );
        (self.frag[v], after)
    }
}

/// A column of per-option inputs: a numpy array's view or a list from Python.
pub(crate) trait Column: Index<usize, Output = i64> {
    fn entries(&self) -> usize;
}

impl Column for Vec<i64> {
    fn entries(&self) -> usize {
        self.len()
    }
}

impl Column for ArrayView1<'_, i64> {
    fn entries(&self) -> usize {
        self.len()
    }
}

/// One batch of options, checked once for the four entry points that take one: the free
/// CPU and idle milli-GPU of each option's node before the placement, and for a
/// fractional task the free share of the option's GPU.
pub(crate) struct Options<'a, C: Column> {
    count: usize,
    cpu_free: &'a C,
    idle: &'a C,
    free: Option<&'a C>,
    task: &'a Task,
}

impl<'a, C: Column> Options<'a, C> {
    /// `what` names the entry point in the error a caller sees.
    fn new(
        what: &str,
        count: usize,
        cpu_free: &'a C,
        idle: &'a C,
        free: Option<&'a C>,
        task: &'a Task,
    ) -> PyResult<Self> {
        if cpu_free.entries() != count
            || idle.entries() != count
            || free.is_some_and(|f| f.entries() != count)
        {
            return Err(PyValueError::new_err(format!(
                "{what}: one node, free CPU, idle (and free share) per option"
            )));
        }
        if task.fractional && free.is_none() {
            return Err(PyValueError::new_err(format!(
                "{what}: a fractional task needs each option's free share"
            )));
        }
        Ok(Options { count, cpu_free, idle, free, task })
    }
}

impl FragTable {
    /// F(v) and F(v') of every option in order, handed to `each` with the option's
    /// index; `slot_of` says which table slot option i is on.
    fn each_option<C: Column>(
        &self,
        options: &Options<C>,
        slot_of: impl Fn(usize) -> PyResult<usize>,
        mut each: impl FnMut(usize, f64, f64),
    ) -> PyResult<()> {
        let k = self.mix.k();
        let (mut cnt, mut frag) = (vec![0i64; k], vec![0i64; k]);
        for i in 0..options.count {
            let v = slot_of(i)?;
            let free = options.free.map_or(0, |f| f[i]);
            let (cpu, idle) = (options.cpu_free[i], options.idle[i]);
            let (b, a) = self.option(v, cpu, idle, free, options.task, &mut cnt, &mut frag);
            each(i, b, a);
        }
        Ok(())
    }

    /// The slot of the node at position `at[i]` of `nodes` (the scalar path's options).
    fn slot_at(&self, nodes: &ArrayView1<i64>, at: &[usize], i: usize) -> PyResult<usize> {
        let node = *nodes.get(at[i]).ok_or_else(|| {
            PyValueError::new_err(format!(
                "option {i} names position {} of {} nodes",
                at[i],
                nodes.len()
            ))
        })?;
        self.slot(node)
    }
}

/// One node's row: (cnt_ge, frag_lt, code0, F(v)).
type Row = (Vec<i64>, Vec<i64>, Vec<i64>, f64);
/// F(v) and F(v') per option.
type Pair<'py> = (Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<f64>>);

/// The task being placed, as the fragmentation change needs it.
pub(crate) struct Task {
    pub(crate) cpu: i64,
    pub(crate) num_gpu: i64,
    pub(crate) share: i64,
    pub(crate) fractional: bool,
}

impl Task {
    /// The milli-GPU the placement takes from the node.
    fn taken(&self) -> i64 {
        if self.fractional {
            self.share
        } else {
            self.num_gpu * self.share
        }
    }
}

/// How a FGD-family policy turns F(v), F(v') into its score: trunc(100 * sigmoid(x /
/// scale)) by the steps of its formula (`Sigmoid`) with x = F(v) - F(v'), less hetsched's terms when given: `strand` = (ratio,
/// weight) for the growth of free milli-GPU the node's free CPU cannot feed at the mix's
/// ratio, and a scarcity `pressure` per option times its weight and the milli-GPU taken.
pub(crate) struct ScoreSpec {
    sigmoid: Sigmoid,
    scale: f64,
    strand: Option<(f64, f64)>,
    pressure_weight: f64,
}

impl ScoreSpec {
    pub(crate) fn new(
        sigmoid: &str,
        scale: f64,
        strand: Option<(f64, f64)>,
        pressure_weight: f64,
    ) -> PyResult<Self> {
        if scale.is_nan() || scale <= 0.0 {
            return Err(PyValueError::new_err(format!("scale must be > 0, got {scale}")));
        }
        Ok(ScoreSpec { sigmoid: Sigmoid::named(sigmoid)?, scale, strand, pressure_weight })
    }

    /// One option's score; `cpu`, `idle`: its node's free CPU and idle milli-GPU before.
    pub(crate) fn score(
        &self,
        before: f64,
        after: f64,
        cpu: i64,
        idle: i64,
        task: &Task,
        pressure: Option<f64>,
    ) -> f64 {
        let mut x = before - after;
        let taken = task.taken();
        if let Some((ratio, weight)) = self.strand {
            let stranded = |idle: i64, cpu: i64| (idle as f64 - cpu as f64 * ratio).max(0.0);
            let growth = stranded(idle - taken, cpu - task.cpu) - stranded(idle, cpu);
            x -= if weight == 1.0 { growth } else { weight * growth };
        }
        if let Some(p) = pressure {
            x -= self.pressure_weight * p * taken as f64;
        }
        self.sigmoid.centile(x / self.scale)
    }
}

#[pymethods]
impl FragTable {
    /// `model_ok[j][k]`: typical task k accepts model id j (last row: no GPU model).
    #[new]
    fn new(
        cpu_milli: Vec<i64>,
        gpu_milli: Vec<i64>,
        num_gpu: Vec<i64>,
        prob: Vec<f64>,
        model_ok: Vec<Vec<bool>>,
    ) -> PyResult<Self> {
        let k = prob.len();
        if k == 0 || cpu_milli.len() != k || gpu_milli.len() != k || num_gpu.len() != k {
            return Err(PyValueError::new_err(format!(
                "typical tasks: cpu_milli, gpu_milli, num_gpu and prob need one equal, \
                 non-zero length (got {}, {}, {}, {k})",
                cpu_milli.len(),
                gpu_milli.len(),
                num_gpu.len()
            )));
        }
        if model_ok.is_empty() || model_ok.iter().any(|col| col.len() != k) {
            return Err(PyValueError::new_err(format!(
                "model_ok needs one column of {k} flags per model id and one for no model"
            )));
        }
        let cpu_only8 = gpu_milli.iter().map(|&g| if g == 0 { 8 } else { 0 }).collect();
        Ok(FragTable {
            mix: Mix { cpu: cpu_milli, gpu: gpu_milli, num: num_gpu, prob, cpu_only8, model_ok },
            version: Vec::new(),
            cnt_ge: Vec::new(),
            frag_lt: Vec::new(),
            code0: Vec::new(),
            frag: Vec::new(),
        })
    }

    /// Bring the rows of `idx` (all of the first `n` slots when None) up to `version`.
    #[pyo3(signature = (n, version, gpu_free, cpu_free, model, idx=None))]
    fn refresh(
        &mut self,
        n: usize,
        version: PyReadonlyArray1<i64>,
        gpu_free: PyReadonlyArray2<i64>,
        cpu_free: PyReadonlyArray1<i64>,
        model: PyReadonlyArray1<i64>,
        idx: Option<PyReadonlyArray1<i64>>,
    ) -> PyResult<()> {
        let (version, gpu_free) = (version.as_array(), gpu_free.as_array());
        let (cpu_free, model) = (cpu_free.as_array(), model.as_array());
        let rows = version.len().min(gpu_free.nrows()).min(cpu_free.len()).min(model.len());
        if n > rows {
            return Err(PyValueError::new_err(format!(
                "n = {n} but the state's arrays hold {rows} node slots"
            )));
        }
        match idx {
            None => self.refresh_slots(n, version, gpu_free, cpu_free, model, 0..n),
            Some(idx) => {
                let idx = idx.as_array();
                if let Some(&v) = idx.iter().find(|&&v| v < 0 || v as usize >= n) {
                    return Err(PyValueError::new_err(format!(
                        "node slot {v} is outside the state's {n} nodes"
                    )));
                }
                self.refresh_slots(
                    n,
                    version,
                    gpu_free,
                    cpu_free,
                    model,
                    idx.iter().map(|&v| v as usize),
                )
            }
        }
    }

    /// F(v) of the first `n` slots (a copy).
    fn frag<'py>(&self, py: Python<'py>, n: usize) -> PyResult<Bound<'py, PyArray1<f64>>> {
        if n > self.frag.len() {
            return Err(PyValueError::new_err(format!(
                "n = {n} but the table holds {} rows (refresh it first)",
                self.frag.len()
            )));
        }
        Ok(self.frag[..n].to_vec().into_pyarray(py))
    }

    /// One slot's row: (cnt_ge, frag_lt, code0, F(v)); for tests and explanations.
    fn row(&self, v: i64) -> PyResult<Row> {
        let v = self.slot(v)?;
        let k = self.mix.k();
        let r = v * k..(v + 1) * k;
        Ok((
            self.cnt_ge[r.clone()].to_vec(),
            self.frag_lt[r.clone()].to_vec(),
            self.code0[r].to_vec(),
            self.frag[v],
        ))
    }

    /// F(v) and F(v') of each option as numpy arrays: option i is on slot `slots[i]`,
    /// whose free CPU and idle milli-GPU before the placement are `cpu_free[i]` and
    /// `idle[i]`; `free[i]` is the free share of its GPU (fractional tasks only).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (slots, cpu_free, idle, free, task_cpu, num_gpu, share, fractional))]
    fn delta<'py>(
        &self,
        py: Python<'py>,
        slots: PyReadonlyArray1<i64>,
        cpu_free: PyReadonlyArray1<i64>,
        idle: PyReadonlyArray1<i64>,
        free: Option<PyReadonlyArray1<i64>>,
        task_cpu: i64,
        num_gpu: i64,
        share: i64,
        fractional: bool,
    ) -> PyResult<Pair<'py>> {
        let slots = slots.as_array();
        let (cpu_free, idle) = (cpu_free.as_array(), idle.as_array());
        let free = free.as_ref().map(|f| f.as_array());
        let task = Task { cpu: task_cpu, num_gpu, share, fractional };
        let options = Options::new("delta", slots.len(), &cpu_free, &idle, free.as_ref(), &task)?;
        let (mut before, mut after) = (Vec::new(), Vec::new());
        self.each_option(
            &options,
            |i| self.slot(slots[i]),
            |_, b, a| {
                before.push(b);
                after.push(a);
            },
        )?;
        Ok((before.into_pyarray(py), after.into_pyarray(py)))
    }

    /// `delta` for the scheduler's scalar path: option i is on slot `nodes[at[i]]`; the
    /// rest as in `delta`, as Python lists in and out.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (nodes, at, cpu_free, idle, free, task_cpu, num_gpu, share, fractional))]
    fn delta_rows(
        &self,
        nodes: PyReadonlyArray1<i64>,
        at: Vec<usize>,
        cpu_free: Vec<i64>,
        idle: Vec<i64>,
        free: Option<Vec<i64>>,
        task_cpu: i64,
        num_gpu: i64,
        share: i64,
        fractional: bool,
    ) -> PyResult<(Vec<f64>, Vec<f64>)> {
        let nodes = nodes.as_array();
        let task = Task { cpu: task_cpu, num_gpu, share, fractional };
        let options = Options::new("delta_rows", at.len(), &cpu_free, &idle, free.as_ref(), &task)?;
        let (mut before, mut after) = (Vec::new(), Vec::new());
        self.each_option(
            &options,
            |i| self.slot_at(&nodes, &at, i),
            |_, b, a| {
                before.push(b);
                after.push(a);
            },
        )?;
        Ok((before, after))
    }

    /// FGD-family scores of each option (see `ScoreSpec`), options as in `delta`;
    /// `pressure`: (weight, the scarcity pressure of each option's model).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (slots, cpu_free, idle, free, task_cpu, num_gpu, share, fractional,
                        sigmoid, scale, strand=None, pressure=None))]
    fn scores<'py>(
        &self,
        py: Python<'py>,
        slots: PyReadonlyArray1<i64>,
        cpu_free: PyReadonlyArray1<i64>,
        idle: PyReadonlyArray1<i64>,
        free: Option<PyReadonlyArray1<i64>>,
        task_cpu: i64,
        num_gpu: i64,
        share: i64,
        fractional: bool,
        sigmoid: &str,
        scale: f64,
        strand: Option<(f64, f64)>,
        pressure: Option<(f64, PyReadonlyArray1<f64>)>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let spec = ScoreSpec::new(sigmoid, scale, strand, pressure.as_ref().map_or(0.0, |p| p.0))?;
        let per_option = pressure.as_ref().map(|p| p.1.as_array());
        let slots = slots.as_array();
        if per_option.as_ref().is_some_and(|p| p.len() != slots.len()) {
            return Err(PyValueError::new_err("scores: one pressure per option"));
        }
        let (cpu_free, idle) = (cpu_free.as_array(), idle.as_array());
        let free = free.as_ref().map(|f| f.as_array());
        let task = Task { cpu: task_cpu, num_gpu, share, fractional };
        let options = Options::new("scores", slots.len(), &cpu_free, &idle, free.as_ref(), &task)?;
        let mut out = Vec::new();
        self.each_option(
            &options,
            |i| self.slot(slots[i]),
            |i, b, a| {
                let p = per_option.as_ref().map(|p| p[i]);
                out.push(spec.score(b, a, cpu_free[i], idle[i], &task, p));
            },
        )?;
        Ok(out.into_pyarray(py))
    }

    /// `scores` for the scheduler's scalar path: options as in `delta_rows`, lists in and out.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (nodes, at, cpu_free, idle, free, task_cpu, num_gpu, share, fractional,
                        sigmoid, scale, strand=None, pressure=None))]
    fn scores_rows(
        &self,
        nodes: PyReadonlyArray1<i64>,
        at: Vec<usize>,
        cpu_free: Vec<i64>,
        idle: Vec<i64>,
        free: Option<Vec<i64>>,
        task_cpu: i64,
        num_gpu: i64,
        share: i64,
        fractional: bool,
        sigmoid: &str,
        scale: f64,
        strand: Option<(f64, f64)>,
        pressure: Option<(f64, Vec<f64>)>,
    ) -> PyResult<Vec<f64>> {
        let spec = ScoreSpec::new(sigmoid, scale, strand, pressure.as_ref().map_or(0.0, |p| p.0))?;
        let per_option = pressure.as_ref().map(|p| &p.1);
        if per_option.is_some_and(|p| p.len() != at.len()) {
            return Err(PyValueError::new_err("scores_rows: one pressure per option"));
        }
        let nodes = nodes.as_array();
        let task = Task { cpu: task_cpu, num_gpu, share, fractional };
        let options =
            Options::new("scores_rows", at.len(), &cpu_free, &idle, free.as_ref(), &task)?;
        let mut out = Vec::new();
        self.each_option(
            &options,
            |i| self.slot_at(&nodes, &at, i),
            |i, b, a| {
                let p = per_option.map(|p| p[i]);
                out.push(spec.score(b, a, cpu_free[i], idle[i], &task, p));
            },
        )?;
        Ok(out)
    }
}
