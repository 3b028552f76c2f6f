//! The kernel's parameter list as its cubin records it, against the declaration: an
//! argument missing, one too many, or one of the wrong size (an fp16 scalar where the
//! kernel takes a float) would make every launch read garbage, and nothing else catches it.
//!
//! nvcc writes, per entry, a `.nv.info.<entry>` section of records `(format, attribute,
//! value)`. `EIATTR_KPARAM_INFO` (0x17) gives one parameter's ordinal, offset and size;
//! `EIATTR_PARAM_CBANK` (0x0a) the size of the whole parameter block.

use super::problem::{path, Problem};
use super::spec::{Arg, Declaration, RefArg};
use repro_base::{elf::u16_at, elf::u32_at, elf::Elf};

const EIATTR_PARAM_CBANK: u8 = 0x0a;
const EIATTR_KPARAM_INFO: u8 = 0x17;

/// One parameter of a kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Param {
    pub ordinal: usize,
    pub offset: usize,
    pub size: usize,
}

/// A kernel's parameters, by ordinal, and the size of the parameter block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub params: Vec<Param>,
    pub block_bytes: Option<usize>,
}

/// The parameter layout of `entry` in the cubin `elf`.
pub fn layout(elf: &[u8], entry: &str) -> Result<Layout, String> {
    let elf = Elf::parse(elf).ok_or("not an ELF64 file")?;
    let name = format!(".nv.info.{entry}");
    let Some(section) = elf.section_named(&name) else {
        let entries: Vec<String> = elf
            .sections()
            .filter_map(|s| elf.name(&s)?.strip_prefix(b".nv.info."))
            .map(|n| format!("`{}`", String::from_utf8_lossy(n)))
            .collect();
        return Err(format!(
            "the cubin has no kernel `{entry}` (its kernels: {})",
            if entries.is_empty() {
                "none".to_string()
            } else {
                entries.join(", ")
            }
        ));
    };
    let data = elf
        .data(&section)
        .ok_or("its .nv.info section lies outside the file")?;
    let mut params = Vec::new();
    let mut block_bytes = None;
    let mut at = 0;
    while at + 2 <= data.len() {
        let (format, attribute) = (data[at], data[at + 1]);
        at += match format {
            1 => 4, // no value (padded to 4)
            2 => 4, // a byte (padded)
            3 => 4, // a 16-bit value
            4 => {
                let len = u16_at(data, at + 2).ok_or("a truncated record")? as usize;
                let value = data.get(at + 4..at + 4 + len).ok_or("a truncated record")?;
                match attribute {
                    EIATTR_KPARAM_INFO if len == 12 => params.push(Param {
                        ordinal: u16_at(value, 4).ok_or("short")? as usize,
                        offset: u16_at(value, 6).ok_or("short")? as usize,
                        size: (u32_at(value, 8).ok_or("short")? >> 18) as usize,
                    }),
                    EIATTR_PARAM_CBANK if len == 8 => {
                        block_bytes = Some(u16_at(value, 6).ok_or("short")? as usize);
                    }
                    _ => {}
                }
                4 + len
            }
            other => return Err(format!("an .nv.info record of unknown format {other}")),
        };
    }
    params.sort_by_key(|p| p.ordinal);
    if params.iter().enumerate().any(|(i, p)| p.ordinal != i) {
        return Err("its parameter records skip an ordinal".into());
    }
    Ok(Layout {
        params,
        block_bytes,
    })
}

/// One parameter the declaration expects, and where it is declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    pub name: String,
    pub size: usize,
    /// What sets the size: the argument's `role` (a pointer) or its `dtype`.
    pub path: Vec<String>,
}

/// A buffer is passed as a 64-bit pointer; a scalar by value.
fn expected(a: &Arg, at: Vec<String>) -> Expected {
    let (size, key) = if a.is_buffer() {
        (8, "role")
    } else {
        (a.dtype.size(), "dtype")
    };
    let mut path = at;
    path.push(key.into());
    Expected {
        name: a.name.clone(),
        size,
        path,
    }
}

/// The parameters of the workload's kernels, from `args`.
pub fn kernel_params(workload: &str, decl: &Declaration) -> Vec<Expected> {
    decl.args
        .iter()
        .enumerate()
        .map(|(i, a)| expected(a, path(workload, &["args", &i.to_string()])))
        .collect()
}

/// The parameters of the reference kernel: its own `args`, else the workload's.
pub fn reference_params(workload: &str, decl: &Declaration) -> Vec<Expected> {
    let Some(list) = &decl.reference.args else {
        return kernel_params(workload, decl);
    };
    list.iter()
        .enumerate()
        .map(|(i, r)| match r {
            RefArg::Name(n) => {
                let (j, a) = decl.arg(n).expect("a declared argument (validated)");
                expected(a, path(workload, &["args", &j.to_string()]))
            }
            RefArg::Extra(a) => expected(a, path(workload, &["reference", "args", &i.to_string()])),
        })
        .collect()
}

/// Every way `layout` (of kernel `entry`) differs from `want`, declared at `list` (the
/// `args` key).
pub fn check(entry: &str, want: &[Expected], layout: &Layout, list: Vec<String>) -> Vec<Problem> {
    let mut out = Vec::new();
    let got = &layout.params;
    if got.len() != want.len() {
        let sizes: Vec<String> = got.iter().map(|p| p.size.to_string()).collect();
        out.push(
            Problem::at(
                list,
                format!(
                    "kernel `{entry}` takes {} parameters (of {} bytes) but {} are declared",
                    got.len(),
                    sizes.join(", "),
                    want.len()
                ),
                "declare one argument per kernel parameter, in the order of its signature",
            )
            .on_key(),
        );
    }
    for (i, (w, g)) in want.iter().zip(got).enumerate() {
        if w.size != g.size {
            let what = if w.path.last().is_some_and(|k| k == "role") {
                "a buffer, passed as an 8-byte pointer".to_string()
            } else {
                format!("{} bytes", w.size)
            };
            out.push(Problem::at(
                w.path.clone(),
                format!(
                    "argument `{}` is {what}, but parameter {i} of kernel `{entry}` is {} bytes",
                    w.name, g.size
                ),
                "match the kernel's signature: pointers are inputs or outputs, values are scalars of the parameter's type",
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests;
