//! FGD-family placement scores, trunc(100 * sigmoid(y)), decided by comparisons alone.
//!
//! FGD (Weng et al., USENIX ATC'23) scores a placement trunc(1 / (1 + exp(-y)) * 100) with
//! y = (F(v) - F(v')) / 1000; hetsched computes trunc(100 / (1 + exp(-y))) over a richer y
//! (streams/policies/fgd.py, hetsched.py). Evaluated with `exp`, a score depends on the
//! platform's `exp` in its last bit (numpy's vectorized `exp` and the C library's differ
//! in 1 of ~20 arguments on the machine this was written on), and so, rarely, does a
//! decision. Each formula is a step function of y, so it is fixed here by the 100 points
//! where it steps: the smallest double y at which it reaches k = 1..=100, found by
//! bisection over the doubles with the C library's `exp` (glibc 2.36). The score is the
//! number of those points at most y. This keeps the formulas' own rounding, which the
//! published runs depend on: F(v') one ulp above F(v) gives y = -1e-16, where both
//! formulas say 50, not 49 (docs/packing-benchmark.md §4's bit-exact note).
//! tests/oracle/scores.py finds the points again and compares.

/// Which formula's steps: FGD's `trunc(1 / (1 + e) * 100)` or hetsched's `trunc(100 / (1 + e))`.
#[derive(Clone, Copy)]
pub enum Sigmoid {
    Fgd,
    Hetsched,
}

/// Where `trunc(1 / (1 + exp(-y)) * 100)` reaches 1, 2, ..., 100 (the doubles' bits:
/// `f64::from_bits` is `const` only from Rust 1.83).
#[rustfmt::skip]
const FGD_STEPS: [u64; 100] = [
    0xc012616719161d2b, 0xc00f2272ae325a57, 0xc00bcf0cd474166b, 0xc0096ca77c922cf8,
    0xc0078e360604b32c, 0xc0060324f23a6f31, 0xc004b18a2ece7fb3, 0xc00389ed3e132574,
    0xc0028253079db672, 0xc00193ea7aad030a, 0xc000b9d677dddea0, 0xbfffe0fe73ce8885,
    0xbffe6a53bbe5e6a6, 0xbffd0b6d7df77dca, 0xbffbc0ed0947fbe9, 0xbffa881a29e52373,
    0xbff95ebab1969313, 0xbff842f595c35286, 0xbff7333ddeaaa5d1, 0xbff62e42fefa39ef,
    0xbff532e4fddf686a, 0xbff4402b6211ad15, 0xbff3553e218d610f, 0xbff2716011df4657,
    0xbff193ea7aad030b, 0xbff0bc49861276d8, 0xbfefd3f2b9036cf2, 0xbfee39078d49916a,
    0xbfeca6fc71eebdcc, 0xbfeb1d10670aae9a, 0xbfe99a93ca5c286f, 0xbfe81ee60afb501a,
    0xbfe6a973b5e9a627, 0xbfe539b4cb6ce55f, 0xbfe3cf2b50617c96, 0xbfe269621134db93,
    0xbfe107eb8e2da1e5, 0xbfdf54c21463c16a, 0xbfdca0c36ce6521c, 0xbfd9f323ecbf984f,
    0xbfd74b356ffd351e, 0xbfd4a851baf27b6f, 0xbfd209d96a324508, 0xbfcede65f58845be,
    0xbfc9af93cd23440b, 0xbfc4861ba31d0a04, 0xbfbec1c712297e9e, 0xbfb47dadcbbdba94,
    0xbfa47b9447a9aa07, 0xbcb7fffffffffffe, 0x3fa47b9447a9a9c4, 0x3fb47dadcbbdba7b,
    0x3fbec1c712297e7c, 0x3fc4861ba31d09fb, 0x3fc9af93cd234413, 0x3fcede65f58845bb,
    0x3fd209d96a324507, 0x3fd4a851baf27b6d, 0x3fd74b356ffd3519, 0x3fd9f323ecbf9849,
    0x3fdca0c36ce65216, 0x3fdf54c21463c167, 0x3fe107eb8e2da1e5, 0x3fe269621134db90,
    0x3fe3cf2b50617c95, 0x3fe539b4cb6ce55b, 0x3fe6a973b5e9a624, 0x3fe81ee60afb5015,
    0x3fe99a93ca5c2867, 0x3feb1d10670aae98, 0x3feca6fc71eebdc9, 0x3fee39078d499169,
    0x3fefd3f2b9036cf2, 0x3ff0bc49861276d8, 0x3ff193ea7aad030b, 0x3ff2716011df4658,
    0x3ff3553e218d610d, 0x3ff4402b6211ad15, 0x3ff532e4fddf686b, 0x3ff62e42fefa39ed,
    0x3ff7333ddeaaa5cd, 0x3ff842f595c35285, 0x3ff95ebab196930f, 0x3ffa881a29e52371,
    0x3ffbc0ed0947fbe6, 0x3ffd0b6d7df77dc7, 0x3ffe6a53bbe5e6a5, 0x3fffe0fe73ce8885,
    0x4000b9d677dddea2, 0x400193ea7aad030c, 0x40028253079db673, 0x400389ed3e132573,
    0x4004b18a2ece7fb3, 0x40060324f23a6f2e, 0x40078e360604b32b, 0x40096ca77c922cef,
    0x400bcf0cd474166b, 0x400f2272ae325a49, 0x4012616719161d18, 0x40425e4f7b2737fb,
];

/// Where `trunc(100 / (1 + exp(-y)))` reaches 1, 2, ..., 100 (bits, as above).
#[rustfmt::skip]
const HETSCHED_STEPS: [u64; 100] = [
    0xc012616719161d2b, 0xc00f2272ae325a57, 0xc00bcf0cd474166b, 0xc0096ca77c922cf8,
    0xc0078e360604b32c, 0xc0060324f23a6f31, 0xc004b18a2ece7fb3, 0xc00389ed3e132574,
    0xc0028253079db672, 0xc00193ea7aad030a, 0xc000b9d677dddea0, 0xbfffe0fe73ce8885,
    0xbffe6a53bbe5e6a6, 0xbffd0b6d7df77dcb, 0xbffbc0ed0947fbe9, 0xbffa881a29e52373,
    0xbff95ebab1969313, 0xbff842f595c35286, 0xbff7333ddeaaa5d2, 0xbff62e42fefa39ef,
    0xbff532e4fddf686a, 0xbff4402b6211ad15, 0xbff3553e218d610f, 0xbff2716011df4657,
    0xbff193ea7aad030b, 0xbff0bc49861276d8, 0xbfefd3f2b9036cf2, 0xbfee39078d49916c,
    0xbfeca6fc71eebdcc, 0xbfeb1d10670aae9a, 0xbfe99a93ca5c286d, 0xbfe81ee60afb501a,
    0xbfe6a973b5e9a627, 0xbfe539b4cb6ce55f, 0xbfe3cf2b50617c96, 0xbfe269621134db93,
    0xbfe107eb8e2da1e5, 0xbfdf54c21463c171, 0xbfdca0c36ce6521f, 0xbfd9f323ecbf984f,
    0xbfd74b356ffd351e, 0xbfd4a851baf27b6f, 0xbfd209d96a324508, 0xbfcede65f58845be,
    0xbfc9af93cd23441e, 0xbfc4861ba31d0a04, 0xbfbec1c712297e9e, 0xbfb47dadcbbdba94,
    0xbfa47b9447a9aa07, 0xbcb7fffffffffffe, 0x3fa47b9447a9a9f6, 0x3fb47dadcbbdba7b,
    0x3fbec1c712297e7c, 0x3fc4861ba31d09fb, 0x3fc9af93cd234413, 0x3fcede65f58845b6,
    0x3fd209d96a324507, 0x3fd4a851baf27b6d, 0x3fd74b356ffd351c, 0x3fd9f323ecbf9849,
    0x3fdca0c36ce65216, 0x3fdf54c21463c16b, 0x3fe107eb8e2da1e5, 0x3fe269621134db90,
    0x3fe3cf2b50617c93, 0x3fe539b4cb6ce55b, 0x3fe6a973b5e9a624, 0x3fe81ee60afb5015,
    0x3fe99a93ca5c286c, 0x3feb1d10670aae98, 0x3feca6fc71eebdc9, 0x3fee39078d499169,
    0x3fefd3f2b9036cf2, 0x3ff0bc49861276d8, 0x3ff193ea7aad030b, 0x3ff2716011df4654,
    0x3ff3553e218d610d, 0x3ff4402b6211ad13, 0x3ff532e4fddf6867, 0x3ff62e42fefa39ed,
    0x3ff7333ddeaaa5d1, 0x3ff842f595c35285, 0x3ff95ebab1969313, 0x3ffa881a29e52371,
    0x3ffbc0ed0947fbe6, 0x3ffd0b6d7df77dc7, 0x3ffe6a53bbe5e6a5, 0x3fffe0fe73ce8885,
    0x4000b9d677ddde9e, 0x400193ea7aad0308, 0x40028253079db673, 0x400389ed3e132573,
    0x4004b18a2ece7fb3, 0x40060324f23a6f2e, 0x40078e360604b32b, 0x40096ca77c922cef,
    0x400bcf0cd474166b, 0x400f2272ae325a49, 0x4012616719161d18, 0x40425e4f7b2737fb,
];

impl Sigmoid {
    pub fn steps(self) -> &'static [u64; 100] {
        match self {
            Sigmoid::Fgd => &FGD_STEPS,
            Sigmoid::Hetsched => &HETSCHED_STEPS,
        }
    }

    /// The formula's value at y, 0..=100; NaN stays NaN (an infinite weight times zero).
    pub fn centile(self, y: f64) -> f64 {
        if y.is_nan() {
            return f64::NAN;
        }
        self.steps().partition_point(|&t| f64::from_bits(t) <= y) as f64
    }
}

/// The step points of the formula named `form` ("fgd" or "hetsched"), for the oracle.
#[pyo3::pyfunction]
pub fn sigmoid_steps(form: &str) -> pyo3::PyResult<Vec<f64>> {
    Ok(Sigmoid::named(form)?.steps().iter().map(|&t| f64::from_bits(t)).collect())
}

impl Sigmoid {
    pub fn named(form: &str) -> pyo3::PyResult<Self> {
        match form {
            "fgd" => Ok(Sigmoid::Fgd),
            "hetsched" => Ok(Sigmoid::Hetsched),
            _ => Err(pyo3::exceptions::PyValueError::new_err(format!(
                "sigmoid form {form:?}: expected \"fgd\" or \"hetsched\""
            ))),
        }
    }
}
