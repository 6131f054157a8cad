//! Zero-sized tensors through the runtime on every device present: ops whose outputs
//! are empty launch nothing; ops whose inputs are empty but outputs are not write them
//! by a prefill (a reduction's identity, a scatter's initial value, a copy of the
//! non-empty concat piece), without a kernel; the value, view and host-slice APIs all
//! take them. (The conformance table holds every op's zero-sized cases against the
//! reference.)

use kernelc_kernels::spec::OpSpec;
use kernelc_runtime::{HostSlice, HostSliceMut, Runtime, RuntimeError, ScalarType};

mod common;

fn runtimes() -> Vec<Runtime> {
    common::runtimes_on("zero-sized tensors", common::ALL_PATHS)
}

fn spec(json: &str) -> OpSpec {
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{json}: {e}"))
}

#[test]
fn empty_tensors_are_made_read_and_computed_without_launches() {
    for rt in &runtimes() {
        let name = rt.device_name();
        let a = rt.tensor::<f32>(&[0, 3], &[]).unwrap();
        let b = rt.tensor::<f32>(&[1, 3], &[1.0, 2.0, 3.0]).unwrap();
        assert_eq!(a.shape(), &[0, 3]);
        assert!(a.to_vec::<f32>().unwrap().is_empty(), "{name}");
        let before = rt.stats().launches;
        let add = spec(r#"{"op":"binary","func":"add","dtype":"f32","lhs":[0,3],"rhs":[1,3]}"#);
        let out = rt.run(&add, &[&a, &b]).unwrap();
        assert_eq!(out[0].shape(), &[0, 3], "{name}");
        assert!(out[0].to_vec::<f32>().unwrap().is_empty());
        assert_eq!(
            rt.stats().launches,
            before,
            "{name}: an empty op launched a kernel"
        );
        // An empty axis reduced: the identity, written without a kernel.
        let max = spec(r#"{"op":"reduce","func":"max","dtype":"f32","shape":[0,3],"axes":[0]}"#);
        let y = rt.run(&max, &[&a]).unwrap();
        assert_eq!(
            y[0].to_vec::<f32>().unwrap(),
            vec![f32::NEG_INFINITY; 3],
            "{name}"
        );
        let sum = spec(r#"{"op":"reduce","func":"sum","dtype":"i32","shape":[0,3],"axes":[0]}"#);
        let ai = rt.tensor::<i32>(&[0, 3], &[]).unwrap();
        assert_eq!(
            rt.run(&sum, &[&ai]).unwrap()[0].to_vec::<i32>().unwrap(),
            vec![0; 3]
        );
        let min = spec(r#"{"op":"reduce","func":"min","dtype":"u8","shape":[2,0],"axes":[1]}"#);
        let au = rt.tensor::<u8>(&[2, 0], &[]).unwrap();
        assert_eq!(
            rt.run(&min, &[&au]).unwrap()[0].to_vec::<u8>().unwrap(),
            vec![255; 2]
        );
        let mean = spec(r#"{"op":"reduce","func":"mean","dtype":"f32","shape":[0,3],"axes":[0]}"#);
        assert!(rt.run(&mean, &[&a]).unwrap()[0]
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .all(|v| v.is_nan()));
        assert_eq!(
            rt.stats().launches,
            before,
            "{name}: a prefill launched a kernel"
        );
        // A concat of one non-empty piece and empty ones: a copy.
        let cat = spec(r#"{"op":"concat","dtype":"f32","shapes":[[0,3],[1,3],[0,3]],"axis":0}"#);
        let y = rt.run(&cat, &[&a, &b, &a]).unwrap();
        assert_eq!(y[0].to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0], "{name}");
        assert_eq!(
            rt.stats().launches,
            before,
            "{name}: a copy launched a kernel"
        );
    }
}

#[test]
fn argmax_of_an_empty_axis_is_a_typed_error() {
    for rt in &runtimes() {
        let a = rt.tensor::<f32>(&[2, 0], &[]).unwrap();
        let argmax = spec(
            r#"{"op":"reduce","func":"argmax","dtype":"f32","shape":[2,0],"axes":[1],"index_dtype":"i64"}"#,
        );
        match rt.run(&argmax, &[&a]) {
            Err(RuntimeError::Spec(e)) => {
                assert!(e.to_string().contains("empty axis"), "{e}")
            }
            other => panic!("{}: {other:?}", rt.device_name()),
        }
    }
}

#[test]
fn empty_views_and_host_slices_write_only_what_an_op_defines() {
    for rt in &runtimes() {
        let name = rt.device_name();
        // A scatter of no rows into views: the prior, copied; an empty view elsewhere
        // in the buffer touches nothing.
        let buf = rt.alloc_buffer(256).unwrap();
        rt.fill_buffer(&buf, 0, 256, 0x7A).unwrap();
        let prior = buf.view(0, ScalarType::F32, &[2, 2]).unwrap();
        let out = buf.view(64, ScalarType::F32, &[2, 2]).unwrap();
        let updates = buf.view(128, ScalarType::F32, &[0, 2]).unwrap();
        let indices = buf.view(128, ScalarType::I32, &[0]).unwrap();
        rt.write_view(&prior, &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
        let scatter = spec(
            r#"{"op":"scatter","dtype":"f32","index_dtype":"i32","data":[2,2],"indices":[0],"axis":0,"combine":"sum","init":"prior"}"#,
        );
        rt.run_into(&scatter, &[&updates, &indices, &prior], &[&out])
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            rt.read_view::<f32>(&out).unwrap(),
            vec![1.0, 2.0, 3.0, 4.0],
            "{name}"
        );
        let rest = rt.read_buffer(&buf, 80, 176).unwrap();
        assert!(
            rest.iter().all(|&b| b == 0x7A),
            "{name}: bytes past the output changed"
        );
        // Host slices: a sum over an empty axis into a caller's slice.
        let x: [f32; 0] = [];
        let mut y = [9.0f32; 3];
        let sum = spec(r#"{"op":"reduce","func":"sum","dtype":"f32","shape":[3,0],"axes":[1]}"#);
        rt.run_host(
            &sum,
            &[HostSlice::new(&x, &[3, 0]).unwrap()],
            &mut [HostSliceMut::new(&mut y, &[3]).unwrap()],
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(y, [0.0; 3], "{name}");
    }
}
