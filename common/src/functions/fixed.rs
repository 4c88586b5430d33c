//! The shape most of Tethys' scalar functions have: a fixed name, signature
//! and result type, and the work one Rust function does over the call's
//! arguments. [`Fixed::udf`] makes such a function a DataFusion UDF, so each
//! function is its doc and its work, not a struct and a trait impl.
//!
//! ```sql
//! SELECT date_format(ts, '%Y-%m'), datediff(a, b), split_part(s, ',', 2) FROM t
//! ```

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion::error::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
};

/// The work of a function: its name (members of a family share one work)
/// and the call's arguments to its result.
pub(super) type Work = fn(&'static str, ScalarFunctionArgs) -> Result<ColumnarValue>;

/// A scalar function of a fixed name, signature and result type.
#[derive(Debug)]
pub(super) struct Fixed {
    name: &'static str,
    signature: Signature,
    returns: DataType,
    work: Work,
}

impl Fixed {
    /// The UDF `name(...)`: arguments by `signature`, a `returns` result
    /// computed by `work`.
    pub(super) fn udf(
        name: &'static str,
        signature: Signature,
        returns: DataType,
        work: Work,
    ) -> Arc<ScalarUDF> {
        Arc::new(ScalarUDF::from(Fixed {
            name,
            signature,
            returns,
            work,
        }))
    }
}

// Two functions are the same when their name, signature and result are: the
// work of a name is fixed.
impl PartialEq for Fixed {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.signature == other.signature
            && self.returns == other.returns
    }
}

impl Eq for Fixed {}

impl Hash for Fixed {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.name.hash(state);
        self.signature.hash(state);
        self.returns.hash(state);
    }
}

impl ScalarUDFImpl for Fixed {
    named_by_fields!();
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(self.returns.clone())
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        (self.work)(self.name, args)
    }
}
