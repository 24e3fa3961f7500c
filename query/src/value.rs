//! The values a PromQL query returns, shaped like Prometheus' API result types.

use crate::model::Series;
use tessera_model::Labels;

/// One element of an instant vector: a series' labels and its value at `t` (ms).
#[derive(Debug, Clone, PartialEq)]
pub struct VectorElem {
    pub labels: Labels,
    pub t: i64,
    pub v: f64,
}

/// A query result: Prometheus `resultType` `scalar`, `string`, `vector` or `matrix`.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Scalar { t: i64, v: f64 },
    String { t: i64, s: String },
    Vector(Vec<VectorElem>),
    Matrix(Vec<Series>),
}

impl Value {
    /// The Prometheus API name of this value's type.
    pub fn result_type(&self) -> &'static str {
        match self {
            Value::Scalar { .. } => "scalar",
            Value::String { .. } => "string",
            Value::Vector(_) => "vector",
            Value::Matrix(_) => "matrix",
        }
    }
}

/// A successful evaluation: the value plus the annotations Prometheus reports as
/// `warnings` and `infos` (each already formatted, e.g.
/// `PromQL info: metric might not be a counter, name does not end in _total/_sum/_count/_bucket: "foo" (1:6)`).
#[derive(Debug, Clone, PartialEq)]
pub struct QueryOutput {
    pub value: Value,
    pub warnings: Vec<String>,
    pub infos: Vec<String>,
}
