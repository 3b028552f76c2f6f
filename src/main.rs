/// mimalloc instead of glibc's malloc: loading a large pipeline allocates and frees many small
/// strings and paths, and glibc's free lists (consolidation, page faults on fresh arenas) were
/// a fifth of `repro dag`'s time at 2,000 stages (benches/engine.sh).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(repro::commands::main());
}
