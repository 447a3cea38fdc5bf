//! Links the cdylib the way Node expects (napi-build sets the platform link arguments).
fn main() {
    napi_build::setup();
}
