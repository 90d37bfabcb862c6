//! tc's JSON values (`tc -j`): what each kind's printer builds. The writer that prints them as
//! iproute2's `json_writer` does is `sluice-tc`'s.

use serde_json::Value;

/// One JSON value as tc's printers build it.
#[derive(Clone, Debug, PartialEq)]
pub enum J {
    /// An object: members in print order. A member without a name is a bare value, as tc's
    /// `print_string(PRINT_ANY, NULL, ...)` writes it inside an object.
    Obj(Vec<(Option<&'static str>, J)>),
    /// An array.
    Arr(Vec<J>),
    /// A string, number, bool or null.
    V(Value),
    /// Text tc wrote with `fprintf` in the middle of its JSON, copied as it is.
    Raw(String),
}

impl J {
    /// An empty object.
    pub fn obj() -> J {
        J::Obj(Vec::new())
    }

    /// Appends a named member (on an object; ignored otherwise).
    pub fn put(&mut self, k: &'static str, v: impl Into<J>) -> &mut J {
        if let J::Obj(m) = self {
            m.push((Some(k), v.into()));
        }
        self
    }

    /// Appends a member without a name.
    pub fn bare(&mut self, v: impl Into<J>) -> &mut J {
        if let J::Obj(m) = self {
            m.push((None, v.into()));
        }
        self
    }

    /// Appends text tc printed with `fprintf`.
    pub fn raw(&mut self, s: impl Into<String>) -> &mut J {
        let s = s.into();
        if let J::Obj(m) = self {
            if !s.is_empty() {
                m.push((None, J::Raw(s)));
            }
        }
        self
    }
}

impl From<Value> for J {
    fn from(v: Value) -> J {
        J::V(v)
    }
}
impl From<&str> for J {
    fn from(v: &str) -> J {
        J::V(Value::from(v))
    }
}
impl From<String> for J {
    fn from(v: String) -> J {
        J::V(Value::from(v))
    }
}
impl From<bool> for J {
    fn from(v: bool) -> J {
        J::V(Value::from(v))
    }
}
macro_rules! from_num {
    ($($t:ty),*) => {$(impl From<$t> for J {
        fn from(v: $t) -> J {
            J::V(Value::from(v))
        }
    })*};
}
from_num!(u8, u16, u32, u64, i16, i32, i64);
impl From<f64> for J {
    fn from(v: f64) -> J {
        // jsonw_float: printf's %g.
        J::Raw(sluice_core::units::format_g(v, 6))
    }
}
