//! Just enough of ELF64 (little-endian) to read what nvcc writes into a cubin: sections by
//! name and the initial values of symbols. Every offset comes from the file, so every read
//! is checked: a malformed file gives `None`, never a panic.

const SHT_SYMTAB: u32 = 2;
const SHT_NOBITS: u32 = 8;
const SYM_SIZE: usize = 24;

/// A parsed ELF64 little-endian header over the file's bytes.
pub struct Elf<'a> {
    bytes: &'a [u8],
    shoff: usize,
    shentsize: usize,
    shnum: usize,
    shstrndx: usize,
}

/// One section header.
#[derive(Debug, Clone, Copy)]
pub struct Section {
    pub kind: u32,
    pub offset: usize,
    pub size: usize,
    pub link: usize,
    pub info: usize,
    name_at: usize,
}

impl<'a> Elf<'a> {
    /// `None` unless `bytes` starts with an ELF64 little-endian header.
    pub fn parse(bytes: &'a [u8]) -> Option<Elf<'a>> {
        if bytes.get(..4)? != b"\x7fELF" || *bytes.get(4)? != 2 || *bytes.get(5)? != 1 {
            return None;
        }
        Some(Elf {
            bytes,
            shoff: u64_at(bytes, 0x28)? as usize,
            shentsize: u16_at(bytes, 0x3a)? as usize,
            shnum: u16_at(bytes, 0x3c)? as usize,
            shstrndx: u16_at(bytes, 0x3e)? as usize,
        })
    }

    pub fn section(&self, i: usize) -> Option<Section> {
        let b = self.bytes;
        let at = self.shoff.checked_add(i.checked_mul(self.shentsize)?)?;
        Some(Section {
            name_at: u32_at(b, at)? as usize,
            kind: u32_at(b, at.checked_add(4)?)?,
            offset: u64_at(b, at.checked_add(0x18)?)? as usize,
            size: u64_at(b, at.checked_add(0x20)?)? as usize,
            link: u32_at(b, at.checked_add(0x28)?)? as usize,
            info: u32_at(b, at.checked_add(0x2c)?)? as usize,
        })
    }

    /// Every section header that can be read.
    pub fn sections(&self) -> impl Iterator<Item = Section> + '_ {
        (0..self.shnum).filter_map(|i| self.section(i))
    }

    /// A section's name, from the section-name string table.
    pub fn name(&self, s: &Section) -> Option<&'a [u8]> {
        let names = self.section(self.shstrndx)?;
        c_str(self.bytes, names.offset.checked_add(s.name_at)?)
    }

    /// The section named `name`.
    pub fn section_named(&self, name: &str) -> Option<Section> {
        self.sections()
            .find(|s| self.name(s) == Some(name.as_bytes()))
    }

    /// A section's contents.
    pub fn data(&self, s: &Section) -> Option<&'a [u8]> {
        bytes(self.bytes, s.offset, s.size)
    }

    /// The initial value of the 4-byte global `name` (`None`: not defined, or not 4 bytes).
    pub fn i32_global(&self, name: &str) -> Option<i32> {
        let elf = self.bytes;
        let symtab = self.sections().find(|s| s.kind == SHT_SYMTAB)?;
        let strtab = self.section(symtab.link)?;
        let end = symtab.offset.checked_add(symtab.size)?;
        for at in (symtab.offset..end).step_by(SYM_SIZE) {
            let name_at = strtab.offset.checked_add(u32_at(elf, at)? as usize)?;
            if c_str(elf, name_at)? != name.as_bytes() {
                continue;
            }
            let shndx = u16_at(elf, at.checked_add(6)?)? as usize;
            let value = u64_at(elf, at.checked_add(8)?)? as usize;
            let size = u64_at(elf, at.checked_add(16)?)?;
            let holder = self.section(shndx)?;
            if size != 4 {
                return None;
            }
            if holder.kind == SHT_NOBITS {
                return Some(0); // zero-initialized
            }
            let init = bytes(elf, holder.offset.checked_add(value)?, 4)?;
            return Some(i32::from_le_bytes(init.try_into().ok()?));
        }
        None
    }
}

/// The initial value of the 4-byte global `name` of the ELF file `elf`, or `None` when it
/// does not define one (or is not a well-formed little-endian ELF64 file).
pub fn read_i32_global(elf: &[u8], name: &str) -> Option<i32> {
    Elf::parse(elf)?.i32_global(name)
}

/// `len` bytes at `at`; `None` past the end.
pub fn bytes(b: &[u8], at: usize, len: usize) -> Option<&[u8]> {
    b.get(at..at.checked_add(len)?)
}
pub fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(bytes(b, at, 2)?.try_into().ok()?))
}
pub fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes(b, at, 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes(b, at, 8)?.try_into().ok()?))
}
fn c_str(b: &[u8], at: usize) -> Option<&[u8]> {
    let rest = b.get(at..)?;
    Some(&rest[..rest.iter().position(|&c| c == 0)?])
}
