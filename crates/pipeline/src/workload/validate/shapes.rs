//! The workload's dimensions and shapes, its primary shape and its seeds.

use super::{is_identifier, one_of, Checker};

impl Checker<'_> {
    pub(super) fn dims_and_shapes(&mut self) {
        let d = self.decl;
        if d.dims.is_empty() {
            self.push(
                &["dims"],
                "`dims` is empty".into(),
                "name the workload's dimensions, e.g. `dims: [rows, hidden]`",
            );
        }
        for (i, dim) in d.dims.iter().enumerate() {
            let at = ["dims", &i.to_string()];
            if !is_identifier(dim) {
                self.push(
                    &at,
                    format!("dimension `{dim}` is not a name expressions can use"),
                    "use letters, digits and `_`, starting with a letter",
                );
            } else if d.dims[..i].contains(dim) {
                self.push(
                    &at,
                    format!("dimension `{dim}` is listed twice"),
                    "list each dimension once",
                );
            }
        }
        if d.shapes.is_empty() {
            self.push(
                &["shapes"],
                "`shapes` is empty".into(),
                "declare at least one shape",
            );
        }
        for (shape, values) in &d.shapes {
            for dim in &d.dims {
                if !values.contains_key(dim) {
                    self.push(
                        &["shapes", shape],
                        format!("shape `{shape}` gives no value for dimension `{dim}`"),
                        format!("add `{dim}: N` to the shape"),
                    );
                }
            }
            for (dim, v) in values {
                if !d.dims.contains(dim) {
                    let help = one_of(dim, d.dims.iter().map(String::as_str), "dimensions");
                    self.push_key(
                        &["shapes", shape, dim],
                        format!("`{dim}` is not a dimension of the workload"),
                        help,
                    );
                } else if *v < 1 {
                    self.push(
                        &["shapes", shape, dim],
                        format!("dimension `{dim}` is {v}"),
                        "a dimension is a positive integer",
                    );
                }
            }
        }
        for clash in self.define_names().iter().filter(|n| d.dims.contains(n)) {
            self.push(
                &["dims"],
                format!("dimension `{clash}` has the name of a define of this workload's variants"),
                "rename the dimension: in launch expressions the two would be one name",
            );
        }
        if !d.shapes.contains_key(&d.primary) {
            let help = one_of(&d.primary, d.shapes.keys().map(String::as_str), "shapes");
            self.push(
                &["primary"],
                format!("the primary shape `{}` is not under `shapes`", d.primary),
                help,
            );
        }
        if d.seeds.is_empty() {
            self.push(
                &["seeds"],
                "`seeds` is empty".into(),
                "give at least one seed, e.g. `seeds: [0]`",
            );
        }
    }
}
