//! `wrongworld`: a valid component of another world (`test:other/other`), which
//! exports a bare `run` function and no `wasmgate:plugin/tool`.

wit_bindgen::generate!({ path: "wit", world: "other" });

struct Other;

impl Guest for Other {
    fn run() -> String {
        "this is not a wasmgate plugin".into()
    }
}

export!(Other);
