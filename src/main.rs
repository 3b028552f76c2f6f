fn main() {
    std::process::exit(repro::commands::main());
}
