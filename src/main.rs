fn main() {
    std::process::exit(repro::cli::main());
}
