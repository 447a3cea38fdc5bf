//! Links the system speech libraries (Debian: libespeak-ng-dev, flite1-dev; src/cli/setup.sh
//! installs them). Plain `-l` flags: both ship no pkg-config file worth depending on (flite has
//! none), and their headers are not read (the FFI is declared by hand in src/*/ffi.rs).
fn main() {
    println!("cargo:rustc-link-lib=dylib=espeak-ng");
    // The voices first: each depends on the language and lexicon libraries, which depend on flite.
    for lib in [
        "flite_cmu_us_slt",
        "flite_cmu_us_rms",
        "flite_cmu_us_awb",
        "flite_cmu_us_kal16",
        "flite_usenglish",
        "flite_cmulex",
        "flite",
    ] {
        println!("cargo:rustc-link-lib=dylib={lib}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
