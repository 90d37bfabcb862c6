//! Tests of `sluice_model::kinds::hfsc` that need the tc front end.

use sluice_core::hfsc::ServiceCurve;
use sluice_model::error::TcError;
use sluice_model::kinds::hfsc::*;
use sluice_tc::tc::args::{parse_command, TcCmd};

fn class(args: &str) -> Result<HfscClassOpts, TcError> {
    let argv: Vec<String> =
        format!("class add dev d parent 1: classid 1:1 hfsc {args}").split(' ').map(String::from).collect();
    match parse_command(&argv)? {
        TcCmd::Class(c) => match c.opts {
            Some(sluice_model::model::ClassOpts::Hfsc(o)) => Ok(o),
            o => panic!("{o:?}"),
        },
        c => panic!("{c:?}"),
    }
}

#[test]
fn both_curve_forms_and_tcs_conversion() {
    let o = class("sc umax 1540 dmax 5ms rate 10000 ul rate 10000").unwrap();
    assert_eq!(o.rt, Some(ServiceCurve { m1: 308_000, d: 5000, m2: 1250 }));
    assert_eq!(o.ls, o.rt);
    assert_eq!(o.ul, Some(ServiceCurve::linear(1250)));
    assert_eq!(class_options(&o), "sc m1 2464Kbit d 5ms m2 10Kbit ul m1 0bit d 0us m2 10Kbit ");
    // Convex: flat for dmax - umax/rate = 20ms - 1500 B / 125000 B/s = 8 ms.
    let o = class("rt umax 1500 dmax 20ms rate 1mbit").unwrap();
    assert_eq!(o.rt, Some(ServiceCurve { m1: 0, d: 8000, m2: 125_000 }));
    let o = class("rt m1 2mbit d 10ms m2 1mbit ls m2 3mbit").unwrap();
    assert_eq!(class_options(&o), "rt m1 2Mbit d 10ms m2 1Mbit ls m1 0bit d 0us m2 3Mbit ");
    assert_eq!(class(&export_class_args(&o)[1..]).unwrap(), o);
}

#[test]
fn tcs_errors() {
    let msg = |a: &str| class(a).unwrap_err().to_string();
    assert!(msg("ul m2 1mbit").contains("Upper-limit Service Curve without Link-Share"));
    assert!(msg("rt m1 0 m2 0").contains("two zero slopes"));
    assert!(msg("rt m1 x m2 1mbit").contains("HFSC: Illegal \"m1\"\nHFSC: Illegal \"rt\""));
    assert!(msg("rt umax 100 rate 1mbit").contains("umax given but dmax is zero"));
    assert!(msg("rt m1 1mbit").contains("not complete"));
    assert!(msg("foo").contains("HFSC: What is \"foo\" ?"));
}
