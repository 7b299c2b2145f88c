//! Offline hist triggers (`tracestat hist`): every event trace in tests/data against a naive
//! counter written here, the kernel documentation's examples byte for byte, latency
//! histograms, bounded tables with exact `Dropped`, and refused input.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use tracestat::trace::hist::{KeyText, OfflineHist, OfflineSpecError};

// ---- a deliberately naive reference ------------------------------------------------------

/// One event line, naively: (cpu, event, fields). The timestamp is the first token that is
/// `digits.digits:` (or `NNus` followed by a lone `:`); the event is the next token, which
/// ends with `:`; the cpu is the `[NNN]` token, else the leading digits of the token before
/// the timestamp. Fields are `name=value` tokens, a value running on over tokens without
/// `=` up to `==>`.
/// `name=value` pairs of one line.
type NaiveFields = Vec<(String, String)>;

fn naive_line(line: &str) -> Option<(u64, String, NaiveFields)> {
    if line.trim_start().starts_with('#') {
        return None;
    }
    // The function_graph tracer's event comments (`tests/hist/naive.rs` splits them).
    if let Some(ev) = crate::naive::graph_comment_event(line) {
        let toks: Vec<&str> = ev.fields.split_whitespace().collect();
        return Some((
            ev.cpu.parse().ok()?,
            ev.name.to_owned(),
            naive_fields(&toks),
        ));
    }
    let toks: Vec<&str> = line.split_whitespace().collect();
    let is_ts = |t: &str| {
        let t = t.trim_end_matches(':');
        let mut parts = t.split('.');
        matches!((parts.next(), parts.next(), parts.next()), (Some(a), Some(b), None)
            if !a.is_empty() && !b.is_empty() && a.chars().chain(b.chars()).all(|c| c.is_ascii_digit()))
    };
    let mut cpu = None;
    let mut i = 0;
    let ev_at = loop {
        let t = *toks.get(i)?;
        if t.starts_with('[') && t.ends_with(']') && t.len() > 2 {
            cpu = t[1..t.len() - 1].parse().ok();
        } else if i > 0 && is_ts(t) && t.ends_with(':') && cpu.is_some() {
            break i + 1;
        } else if i > 1 && t.ends_with("us") && toks.get(i + 1) == Some(&":") && cpu.is_none() {
            let d: String = toks[i - 1]
                .chars()
                .take_while(|c| c.is_ascii_digit())
                .collect();
            cpu = d.parse().ok();
            break i + 2;
        }
        i += 1;
    };
    let ev = toks.get(ev_at)?.strip_suffix(':')?;
    if ev.is_empty() || !ev.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    // The task-pid must end in -digits.
    if !toks[0].contains('-') {
        return None;
    }
    Some((cpu?, ev.to_owned(), naive_fields(&toks[ev_at + 1..])))
}

/// `name=value` tokens, a value running on over tokens without `=` up to `==>`.
fn naive_fields(toks: &[&str]) -> NaiveFields {
    let mut fields: Vec<(String, String)> = Vec::new();
    let mut open = false;
    for t in toks {
        if *t == "==>" {
            open = false;
        } else if let Some((n, v)) = t.split_once('=')
            && !n.is_empty()
            && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !n.starts_with(|c: char| c.is_ascii_digit())
        {
            fields.push((n.to_owned(), v.to_owned()));
            open = true;
        } else if open {
            let last = fields.last_mut().unwrap();
            last.1.push(' ');
            last.1.push_str(t);
        }
    }
    fields
}

/// A value as the crate's documented typing reads it.
fn naive_number(name: &str, v: &str) -> Option<u64> {
    if let Some(h) = v.strip_prefix("0x") {
        return u64::from_str_radix(h, 16).ok();
    }
    if let Some(d) = v.strip_prefix('-') {
        return d.parse::<i64>().ok().map(|n| (-n) as u64);
    }
    let hexy = [
        "call_site",
        "ptr",
        "skbaddr",
        "hrtimer",
        "timer",
        "function",
        "work",
        "page",
        "addr",
        "ip",
        "caller",
    ];
    if hexy.contains(&name)
        || (v.chars().any(|c| c.is_ascii_alphabetic()) && v.chars().all(|c| c.is_ascii_hexdigit()))
    {
        return u64::from_str_radix(v, 16).ok();
    }
    v.parse().ok()
}

fn key_string(k: &KeyText) -> String {
    match k {
        KeyText::Num(n) => n.to_string(),
        KeyText::Str(s) => s.clone(),
        KeyText::Exec(p, c) => format!("{c}[{p}]"),
    }
}

fn data_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "txt") {
                out.push(p);
            }
        }
    }
    let mut v = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data"),
        &mut v,
    );
    v.sort();
    v
}

fn run(text: &str, specs: &[String]) -> OfflineHist {
    let mut h = OfflineHist::new();
    for s in specs {
        h.add_spec(s).unwrap_or_else(|e| panic!("{s}: {e}"));
    }
    h.read(text.as_bytes(), || false).unwrap();
    h
}

#[test]
fn every_event_trace_matches_a_naive_count() {
    let mut checked_files = 0;
    let mut checked_tables = 0;
    for path in data_files() {
        let text = fs::read_to_string(&path).unwrap_or_default();
        // event -> field -> values in order.
        let mut events: BTreeMap<String, Vec<(u64, NaiveFields)>> = BTreeMap::new();
        for line in text.lines() {
            if let Some((cpu, ev, fields)) = naive_line(line) {
                events.entry(ev).or_default().push((cpu, fields));
            }
        }
        if events.values().all(|v| v.iter().all(|(_, f)| f.is_empty())) {
            continue;
        }
        checked_files += 1;
        for (ev, lines) in &events {
            let mut names: Vec<String> = Vec::new();
            for (_, f) in lines {
                for (n, _) in f {
                    // Names of the common fields fall back to the line's head where an
                    // event line lacks them: not what this naive counter models.
                    let common = [
                        "comm",
                        "common_comm",
                        "cpu",
                        "common_cpu",
                        "common_pid",
                        "common_timestamp",
                    ];
                    if !names.contains(n) && !common.contains(&n.as_str()) {
                        names.push(n.clone());
                    }
                }
            }
            // Hit counts per key value, and per-cpu sums of each field.
            let mut specs = Vec::new();
            for n in &names {
                specs.push(format!("{ev}:keys={n}:size=131072"));
                specs.push(format!("{ev}:keys=cpu:vals={n}:size=131072"));
            }
            for chunk in specs.chunks(60) {
                let h = run(&text, chunk);
                for (spec, table) in chunk.iter().zip(h.tables()) {
                    let field = spec.split(['=', ':']).nth(2).unwrap();
                    let field = if field == "cpu" {
                        spec.split("vals=")
                            .nth(1)
                            .unwrap()
                            .split(':')
                            .next()
                            .unwrap()
                    } else {
                        field
                    };
                    let summing = spec.contains("vals=");
                    // The naive side: the field's kind is what its first value is.
                    let values: Vec<(u64, Option<&str>)> = lines
                        .iter()
                        .map(|(cpu, f)| {
                            (
                                *cpu,
                                f.iter().find(|(n, _)| n == field).map(|(_, v)| v.as_str()),
                            )
                        })
                        .collect();
                    let first = values.iter().find_map(|(_, v)| *v);
                    let numeric = !field.ends_with("comm")
                        && first.is_some_and(|v| naive_number(field, v).is_some());
                    let mut want: BTreeMap<String, (u64, u128)> = BTreeMap::new();
                    let (mut missing, mut not_numeric) = (0, 0);
                    for (cpu, v) in &values {
                        let Some(v) = v else {
                            missing += 1;
                            continue;
                        };
                        if summing {
                            match naive_number(field, v) {
                                Some(n) => {
                                    let e = want.entry(cpu.to_string()).or_default();
                                    e.0 += 1;
                                    e.1 += u128::from(n); // the sums are exact: they never wrap
                                }
                                None => not_numeric += 1,
                            }
                        } else if numeric {
                            match naive_number(field, v) {
                                Some(n) => want.entry(n.to_string()).or_default().0 += 1,
                                None => not_numeric += 1,
                            }
                        } else {
                            let v: String = v.chars().take(256).collect();
                            want.entry(v).or_default().0 += 1;
                        }
                    }
                    let (rows, (hits, entries, dropped)) = table.rows();
                    let got: BTreeMap<String, (u64, u128)> = rows
                        .iter()
                        .map(|r| {
                            (
                                key_string(&r.key[0]),
                                (r.hits, r.vals.first().copied().unwrap_or(0)),
                            )
                        })
                        .collect();
                    let ctx = format!("{}: {spec}", path.display());
                    assert_eq!(got, want, "{ctx}");
                    assert_eq!(entries, want.len(), "{ctx}");
                    assert_eq!(hits, want.values().map(|v| v.0).sum::<u64>(), "{ctx}");
                    assert_eq!(dropped, 0, "{ctx}");
                    let sk = table.skipped();
                    assert_eq!(
                        (sk.missing_field, sk.not_numeric),
                        (missing, not_numeric),
                        "{ctx}"
                    );
                    checked_tables += 1;
                }
            }
        }
    }
    assert!(checked_files >= 2, "event traces found: {checked_files}");
    assert!(checked_tables >= 20, "tables checked: {checked_tables}");
}

/// The function_graph tracer prints events as `/* name: fields */` comments: they are
/// events, with the common values the graph's columns show; `trace_printk` comments are not.
#[test]
fn graph_comment_events_match_the_naive_count() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/real/lkml-graph-migration.txt");
    let text = fs::read_to_string(path).unwrap();
    let h = run(
        &text,
        &[
            "sched_switch:keys=next_comm".to_owned(),
            "sched_switch:keys=common_pid".to_owned(),
            "sched_wakeup:keys=comm".to_owned(),
            "sched_migrate_task:keys=cpu:vals=dest_cpu".to_owned(),
        ],
    );
    // 4 event comments; the 10 trace_printk comments stay other lines.
    assert_eq!(h.lines().get(tracestat::trace::LineKind::TraceEvent), 4);
    let keys = |t: usize| -> BTreeMap<String, u64> {
        let (rows, _) = h.tables()[t].rows();
        rows.iter()
            .map(|r| (key_string(&r.key[0]), r.hits))
            .collect()
    };
    let naive = crate::naive::naive_event_hits(&text, "sched_switch", "next_comm");
    assert_eq!(keys(0), naive);
    assert_eq!(
        keys(0),
        [("migration/4".to_owned(), 1), ("swapper/4".to_owned(), 1)].into()
    );
    // Without funcgraph-proc the lines show no task: common_pid is missing on both.
    assert_eq!(keys(1), BTreeMap::new());
    assert_eq!(h.tables()[1].skipped().missing_field, 2);
    // `comm` is the event's own field here.
    assert_eq!(keys(2), [("migration/4".to_owned(), 1)].into());
    let (rows, _) = h.tables()[3].rows();
    assert_eq!(
        (key_string(&rows[0].key[0]), rows[0].vals[0]),
        ("0".to_owned(), 0)
    );

    // With funcgraph-abstime and -proc every common value is there; a latency needs the time.
    let text = "\
 100.000100 |   1)   sh-4802    |               |  /* sched_waking: comm=bash pid=1977 prio=120 target_cpu=001 */
 100.000110 |   1)   sh-4802    |   0.500 us    |  leaf();
 100.000150 |   1)   sh-4802    |               |  /* sched_switch: prev_comm=sh prev_pid=4802 prev_prio=120 prev_state=S ==> next_comm=bash next_pid=1977 next_prio=120 */
 1)               |  /* sched_switch: prev_comm=bash prev_pid=1977 prev_prio=120 prev_state=S ==> next_comm=sh next_pid=4802 next_prio=120 */
";
    let mut h = run(text, &["sched_switch:keys=common_pid".to_owned()]);
    assert_eq!(h.lines().get(tracestat::trace::LineKind::TraceEvent), 3);
    let (rows, (hits, _, _)) = h.tables()[0].rows();
    assert_eq!((hits, key_string(&rows[0].key[0])), (1, "4802".to_owned()));
    assert_eq!(h.tables()[0].skipped().missing_field, 1);
    h = OfflineHist::new();
    h.add_latency("sched_waking.pid=sched_switch.next_pid", 128)
        .unwrap();
    h.read(text.as_bytes(), || false).unwrap();
    let c = h.latencies()[0].counts();
    // The last switch has no time: neither a start nor an end.
    assert_eq!((c.matched, c.bad_field, c.unmatched_ends), (1, 1, 0));
}

// ---- the kernel documentation's examples -------------------------------------------------

/// Rows of Documentation/trace/histogram.rst (kernel 6.x), "hist trigger examples": the
/// `call_site.hex` table, the `common_pid.execname` table and the plain `call_site` table
/// (rows as printed; the elided middle of each table left out).
const DOC_HEX: &str = "\
{ call_site: ffffffffa026b291 } hitcount:          1  bytes_req:        433
{ call_site: ffffffffa07186ff } hitcount:          1  bytes_req:        176
{ call_site: ffffffff811ae721 } hitcount:          1  bytes_req:      16384
{ call_site: ffffffff811c5134 } hitcount:          1  bytes_req:          8
{ call_site: ffffffffa04a9ebb } hitcount:          1  bytes_req:        511
{ call_site: ffffffff8122e0a6 } hitcount:          1  bytes_req:         12
{ call_site: ffffffff8107da84 } hitcount:          1  bytes_req:        152
{ call_site: ffffffff812d8246 } hitcount:          1  bytes_req:         24
{ call_site: ffffffff811dc1e5 } hitcount:          3  bytes_req:        144
{ call_site: ffffffffa02515e8 } hitcount:          3  bytes_req:        648
{ call_site: ffffffff81258159 } hitcount:          3  bytes_req:        144
{ call_site: ffffffff811c80f4 } hitcount:          4  bytes_req:        544
{ call_site: ffffffffa06c7646 } hitcount:        106  bytes_req:       8024
{ call_site: ffffffffa06cb246 } hitcount:        132  bytes_req:      31680
{ call_site: ffffffffa06cef7a } hitcount:        132  bytes_req:       2112
{ call_site: ffffffff8137e399 } hitcount:        132  bytes_req:      23232
{ call_site: ffffffffa06c941c } hitcount:        185  bytes_req:     171360
{ call_site: ffffffffa06f2a66 } hitcount:        185  bytes_req:      26640
{ call_site: ffffffffa036a70e } hitcount:        265  bytes_req:      10600
{ call_site: ffffffff81325447 } hitcount:        292  bytes_req:        584
{ call_site: ffffffffa072da3c } hitcount:        446  bytes_req:      60656
{ call_site: ffffffffa036b1f2 } hitcount:        526  bytes_req:      29456
{ call_site: ffffffffa0099c06 } hitcount:       1780  bytes_req:      35600
";

const DOC_EXECNAME: &str = "\
{ common_pid: gnome-terminal  [      3196] } hitcount:        280  count:    1093512
{ common_pid: Xorg            [      1309] } hitcount:        525  count:     256640
{ common_pid: compiz          [      2889] } hitcount:         59  count:     254400
{ common_pid: bash            [      8710] } hitcount:          3  count:      66369
{ common_pid: dbus-daemon-lau [      8703] } hitcount:         49  count:      47739
{ common_pid: irqbalance      [      1252] } hitcount:         27  count:      27648
{ common_pid: 01ifupdown      [      8705] } hitcount:          3  count:      17216
{ common_pid: dbus-daemon     [       772] } hitcount:         10  count:      12396
{ common_pid: Socket Thread   [      8342] } hitcount:         11  count:      11264
{ common_pid: nm-dhcp-client. [      8701] } hitcount:          6  count:       7424
{ common_pid: gmain           [      1315] } hitcount:         18  count:       6336
{ common_pid: postgres        [      1892] } hitcount:          2  count:         32
{ common_pid: postgres        [      1891] } hitcount:          2  count:         32
{ common_pid: gmain           [      8704] } hitcount:          2  count:         32
{ common_pid: upstart-dbus-br [      2740] } hitcount:         21  count:         21
{ common_pid: nm-dispatcher.a [      8696] } hitcount:          1  count:         16
{ common_pid: indicator-datet [      2904] } hitcount:          1  count:         16
{ common_pid: gdbus           [      2998] } hitcount:          1  count:         16
{ common_pid: rtkit-daemon    [      2052] } hitcount:          1  count:          8
{ common_pid: init            [         1] } hitcount:          2  count:          2
";

const DOC_PLAIN: &str = "\
{ call_site: 18446744072106379007 } hitcount:          1  bytes_req:        176
{ call_site: 18446744071579557049 } hitcount:          1  bytes_req:       1024
{ call_site: 18446744071580608289 } hitcount:          1  bytes_req:      16384
{ call_site: 18446744072106047046 } hitcount:         69  bytes_req:       5576
{ call_site: 18446744071582116407 } hitcount:         73  bytes_req:       2336
{ call_site: 18446744072099568646 } hitcount:       1676  bytes_req:      33520
";

/// Parses `{ name: KEY } hitcount: N  val: M` rows back into (key text, hits, sum).
fn doc_rows(doc: &str) -> Vec<(String, u64, u64)> {
    doc.lines()
        .map(|l| {
            let key = l[l.find(": ").unwrap() + 2..l.find(" } ").unwrap()]
                .trim()
                .to_owned();
            let nums: Vec<u64> = l[l.find(" } ").unwrap()..]
                .split_whitespace()
                .filter_map(|t| t.parse().ok())
                .collect();
            (key, nums[0], nums[1])
        })
        .collect()
}

/// Event lines that produce `rows`: `hits` events per key, their values summing to `sum`.
fn lines_for(rows: &[(String, u64, u64)], line: impl Fn(&str, u64) -> String) -> String {
    let mut s = String::from("# tracer: nop\n#\n");
    for (key, hits, sum) in rows {
        for i in 0..*hits {
            let v = if i == 0 {
                sum - (hits - 1) * (sum / hits)
            } else {
                sum / hits
            };
            s += &line(key, v);
            s.push('\n');
        }
    }
    s
}

/// Checks the body rows equal the documentation's as a set, in non-decreasing (or
/// non-increasing) order of the sort column, under the kernel's header and with its totals.
fn check_doc(out: &str, info: &str, doc: &str, sort_col: usize, descending: bool) {
    let header = format!("# event histogram\n#\n# trigger info: {info} [active]\n#\n\n");
    assert!(out.starts_with(&header), "{out}");
    let body: Vec<&str> = out[header.len()..]
        .split("\n\nTotals:")
        .next()
        .unwrap()
        .lines()
        .collect();
    let mut got = body.clone();
    got.sort_unstable();
    let mut want: Vec<&str> = doc.lines().collect();
    want.sort_unstable();
    assert_eq!(got, want);
    let col = |l: &str| -> u64 {
        l[l.find(" } ").unwrap()..]
            .split_whitespace()
            .filter_map(|t| t.parse().ok())
            .nth(sort_col)
            .unwrap()
    };
    for w in body.windows(2) {
        let (a, b) = (col(w[0]), col(w[1]));
        assert!(
            if descending { a >= b } else { a <= b },
            "{} / {}",
            w[0],
            w[1]
        );
    }
    let rows = doc_rows(doc);
    let totals = format!(
        "\n\nTotals:\n    Hits: {}\n    Entries: {}\n    Dropped: 0\n",
        rows.iter().map(|r| r.1).sum::<u64>(),
        rows.len()
    );
    assert!(out.ends_with(&totals), "{out}");
}

fn render(h: &OfflineHist) -> String {
    let mut s = String::new();
    h.render(&mut s).unwrap();
    s
}

#[test]
fn kernel_doc_examples_reproduced() {
    // key=call_site.hex:val=bytes_req over kmalloc lines as a 4.x kernel printed them.
    let rows = doc_rows(DOC_HEX);
    let trace = lines_for(&rows, |k, v| {
        format!(
            "            Xorg-1309  [002] .... 1234.000001: kmalloc: call_site={k} ptr=ffff880036a17000 bytes_req={v} bytes_alloc=1024 gfp_flags=GFP_KERNEL"
        )
    });
    let h = run(
        &trace,
        &["kmalloc:hist:key=call_site.hex:val=bytes_req".into()],
    );
    check_doc(
        &render(&h),
        "hist:keys=call_site.hex:vals=hitcount,bytes_req:sort=hitcount:size=2048",
        DOC_HEX,
        0,
        false,
    );
    // The same addresses without .hex print as the kernel's %10llu.
    let rows = doc_rows(DOC_PLAIN);
    let trace = lines_for(&rows, |k, v| {
        let addr: u64 = k.parse().unwrap();
        format!("  cc1-4242  [000] d... 99.5: kmalloc: call_site={addr:x} ptr=0x0 bytes_req={v}")
    });
    let h = run(
        &trace,
        &["kmem/kmalloc:hist:key=call_site:val=bytes_req".into()],
    );
    check_doc(
        &render(&h),
        "hist:keys=call_site:vals=hitcount,bytes_req:sort=hitcount:size=2048",
        DOC_PLAIN,
        0,
        false,
    );
    // key=common_pid.execname:val=count:sort=count.descending over sys_enter_read.
    let rows = doc_rows(DOC_EXECNAME);
    let trace = lines_for(&rows, |k, v| {
        let (comm, pid) = k.rsplit_once('[').unwrap();
        let pid = pid.trim_end_matches(']').trim();
        format!(
            "{:>16}-{pid:<6} [001] ...1 5000.123456: sys_enter_read: fd: 0x00000004, buf: 0x7ffd, count={v}",
            comm.trim_end()
        )
    });
    let h = run(
        &trace,
        &["sys_enter_read:hist:key=common_pid.execname:val=count:sort=count.descending".into()],
    );
    check_doc(
        &render(&h),
        "hist:keys=common_pid.execname:vals=hitcount,count:sort=count.descending:size=2048",
        DOC_EXECNAME,
        1,
        true,
    );
}

#[test]
fn kernel_doc_specs_are_accepted() {
    // Specs from Documentation/trace/histogram.rst that use no kernel-only feature.
    for spec in [
        "kmalloc:hist:key=call_site:val=bytes_req",
        "kmalloc:hist:key=call_site.hex:val=bytes_req",
        "kmalloc:hist:key=call_site.sym:val=bytes_req",
        "kmalloc:hist:key=call_site.sym:val=bytes_req:sort=bytes_req.descending",
        "kmalloc:hist:key=call_site.sym-offset:val=bytes_req:sort=bytes_req.descending",
        "kmalloc:hist:keys=call_site.sym:values=bytes_req,bytes_alloc:sort=bytes_alloc.descending",
        "sys_enter_read:hist:key=common_pid.execname:val=count:sort=count.descending",
        "kmalloc:hist:keys=common_pid.execname,gfp_flags:vals=bytes_alloc",
        "netif_receive_skb:hist:key=len.log2:sort=len",
        "kmalloc:hist:key=bytes_req.buckets=32:val=hitcount:sort=bytes_req",
        "sched_waking:hist:keys=pid:vals=hitcount:sort=hitcount.descending:size=4096",
        "sched_switch:hist:keys=next_pid,common_timestamp.usecs",
        // `if` filters: histogram.rst's conditional triggers and events.rst's filters.
        "netif_receive_skb:hist:keys=skbaddr.hex:vals=len if comm==wget",
        "sched_process_exec:hist:keys=pid if filename==/usr/bin/wget",
        "sched_waking:hist:keys=pid if comm==\"cyclictest\"",
        "sched_switch:hist:keys=next_pid if next_comm==\"cyclictest\"",
        "signal_generate:hist:keys=sig if ((sig >= 10 && sig < 15) || sig == 17) && comm != bash",
        "sched_switch:hist:keys=prev_comm if prev_comm ~ \"*sh\"",
        "sched_switch:hist:keys=prev_comm if prev_comm ~ \"sh*\"",
        "sched_switch:hist:keys=prev_comm if prev_comm ~ \"*sh*\"",
        "sched_switch:hist:keys=prev_comm if prev_comm ~ \"ba*sh\"",
        "sched_wakeup:hist:keys=pid if common_pid == 0",
        "kmalloc:hist:keys=call_site:vals=bytes_req if bytes_req > 256",
        "sched_switch:hist:keys=next_comm if prev_pid == 0 && next_prio < 120",
        "sys_enter_read:hist:key=common_pid.execname:val=count if comm ~ \"bash*\"",
        "kmalloc:hist:keys=gfp_flags:vals=bytes_alloc if gfp_flags & 0x10",
    ] {
        let mut h = OfflineHist::new();
        h.add_spec(spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
    }
}

#[test]
fn sym_and_string_keys_use_the_kernel_widths() {
    let trace = "\
  bash-10  [000] .... 1.000001: kmalloc: call_site=__kmalloc+0x191/0x1b0 ptr=0 bytes_req=8
  bash-10  [000] .... 1.000002: kmalloc: call_site=hid_report_raw_event+0x3ea/0x440 [hid] ptr=0 bytes_req=7
  bash-10  [000] .... 1.000003: kmalloc: call_site=ffffffff811ae8e1 ptr=0 bytes_req=1
";
    let h = run(
        trace,
        &[
            "kmalloc:keys=call_site.sym:vals=bytes_req:sort=bytes_req".into(),
            "kmalloc:keys=call_site.sym-offset:vals=bytes_req:sort=bytes_req".into(),
            "kmalloc:keys=comm".into(),
        ],
    );
    let out = render(&h);
    let rows: Vec<&str> = out.lines().filter(|l| l.starts_with('{')).collect();
    assert_eq!(
        rows,
        [
            // A symbol known only by its text is shown without an address.
            format!(
                "{{ call_site: {:<45} }} hitcount:          1  bytes_req:          1",
                "ffffffff811ae8e1"
            ),
            format!(
                "{{ call_site: {:<45} }} hitcount:          1  bytes_req:          7",
                "hid_report_raw_event [hid]"
            ),
            format!(
                "{{ call_site: {:<45} }} hitcount:          1  bytes_req:          8",
                "__kmalloc"
            ),
            format!(
                "{{ call_site: {:<55} }} hitcount:          1  bytes_req:          1",
                "ffffffff811ae8e1"
            ),
            format!(
                "{{ call_site: {:<55} }} hitcount:          1  bytes_req:          7",
                "hid_report_raw_event+0x3ea/0x440 [hid]"
            ),
            format!(
                "{{ call_site: {:<55} }} hitcount:          1  bytes_req:          8",
                "__kmalloc+0x191/0x1b0"
            ),
            format!("{{ comm: {:<50} }} hitcount:          3", "bash"),
        ]
    );
    // Tables are separated as the kernel separates the triggers of one event.
    assert_eq!(out.matches("\n\n\n# event histogram\n").count(), 2);
}

#[test]
fn numeric_address_keys_with_sym_show_the_address() {
    let trace =
        "  bash-10  [000] .... 1.000001: kmalloc: call_site=0xffffffff811ae8e1 bytes_req=8\n";
    let h = run(trace, &["kmalloc:keys=call_site.sym".into()]);
    assert!(
        render(&h).contains(&format!(
            "{{ call_site: [ffffffff811ae8e1] {:<45} }} hitcount:          1\n",
            "0xffffffff811ae8e1"
        )),
        "{}",
        render(&h)
    );
}

#[test]
fn log2_buckets_usecs_and_compound_keys() {
    let mut trace = String::new();
    for (i, len) in [1u64, 2, 3, 60, 64, 100, 1500, 0].iter().enumerate() {
        trace += &format!(
            "  ksoftirqd/1-16  [001] ..s1 10.{:06}: netif_receive_skb: dev=eth0 skbaddr=ffff8800abcd{i:04x} len={len}\n",
            500_000 + i * 1500
        );
    }
    let h = run(
        &trace,
        &[
            "netif_receive_skb:keys=len.log2:sort=len".into(),
            "netif_receive_skb:keys=len.buckets=64:vals=len:sort=len".into(),
            "netif_receive_skb:keys=common_timestamp.usecs:sort=common_timestamp".into(),
            "netif_receive_skb:keys=dev,cpu,common_pid:vals=len".into(),
        ],
    );
    let out = render(&h);
    let rows: Vec<&str> = out.lines().filter(|l| l.starts_with('{')).collect();
    // `.log2` is the kernel's `ilog2(roundup_pow_of_two(len))`: 3 is 2^2, 60 and 64 are
    // 2^6, 100 is 2^7, 1500 is 2^11 (0 and 1 are 2^0).
    assert_eq!(
        &rows[..8],
        [
            "{ len: ~ 2^0  } hitcount:          2",
            "{ len: ~ 2^1  } hitcount:          1",
            "{ len: ~ 2^2  } hitcount:          1",
            "{ len: ~ 2^6  } hitcount:          2",
            "{ len: ~ 2^7  } hitcount:          1",
            "{ len: ~ 2^11 } hitcount:          1",
            "{ len: ~ 0-63 } hitcount:          5  len:         66",
            "{ len: ~ 64-127 } hitcount:          2  len:        164",
        ]
    );
    assert_eq!(
        rows[8],
        "{ len: ~ 1472-1535 } hitcount:          1  len:       1500"
    );
    assert_eq!(
        rows[9],
        "{ common_timestamp:   10500000 } hitcount:          1"
    );
    assert_eq!(
        rows[16],
        "{ common_timestamp:   10510500 } hitcount:          1"
    );
    assert_eq!(
        rows[17],
        format!(
            "{{ dev: {:<50}, cpu:          1, common_pid:         16 }} hitcount:          8  len:       1730",
            "eth0"
        )
    );
}

// ---- latency -------------------------------------------------------------------------------

#[test]
fn wakeup_latency_per_pid_is_exact() {
    let trace = "\
  bash-1  [000] d... 100.000000: sched_waking: comm=a pid=10 prio=120 target_cpu=000
  bash-1  [000] d... 100.000003: sched_waking: comm=b pid=20 prio=120 target_cpu=001
  <idle>-0  [001] d... 100.000013: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=b next_pid=20 next_prio=120
  <idle>-0  [000] d... 100.000100: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=a next_pid=10 next_prio=120
  a-10  [000] d... 100.000200: sched_switch: prev_comm=a prev_pid=10 prev_prio=120 prev_state=S ==> next_comm=c next_pid=30 next_prio=120
  bash-1  [000] d... 100.001000: sched_waking: comm=a pid=10 prio=120 target_cpu=000
  bash-1  [000] d... 100.001001: sched_waking: comm=a pid=10 prio=120 target_cpu=000
  <idle>-0  [000] d... 100.001005: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=a next_pid=10 next_prio=120
";
    let mut h = OfflineHist::new();
    h.add_latency("sched/sched_waking.pid=sched_switch.next_pid", 2048)
        .unwrap();
    h.read(trace.as_bytes(), || false).unwrap();
    let lat = &h.latencies()[0];
    let c = lat.counts();
    // pid 10: 100 us, then 4 us (the later waking replaced the earlier); pid 20: 10 us;
    // pid 30 was switched in without a waking.
    assert_eq!(
        (c.matched, c.unmatched_ends, c.starts_dropped, c.negative),
        (3, 1, 0, 0)
    );
    let snap = lat.trigger().snapshot();
    let got: Vec<(u64, u64, u128, u64, u64)> = snap
        .rows
        .iter()
        .map(|r| (r.key.0[0], r.hits, r.vals[0], r.min, r.max))
        .collect();
    assert_eq!(got, [(20, 1, 10, 10, 10), (10, 2, 104, 4, 100)]);
    let out = render(&h);
    assert!(out.starts_with(
        "# latency: sched/sched_waking.pid=sched_switch.next_pid (usecs)\n# event histogram\n#\n# trigger info: hist:keys=next_pid:vals=hitcount,lat_us:sort=hitcount:hist=lat_us.log2:size=2048 [active]\n"
    ), "{out}");
    assert!(out.contains("[64, 128)              1 |"), "{out}");
    assert!(out.contains("[4, 8)                 1 |"), "{out}");
}

#[test]
fn latency_starts_are_bounded() {
    let mut trace = String::new();
    for pid in 0..200 {
        trace += &format!("  bash-1  [000] d... 1.{pid:06}: sched_waking: pid={pid}\n");
    }
    for pid in 0..200 {
        trace += &format!("  bash-1  [000] d... 2.{pid:06}: sched_switch: next_pid={pid}\n");
    }
    let mut h = OfflineHist::new();
    h.add_latency("sched_waking.pid=sched_switch.next_pid", 128)
        .unwrap();
    h.read(trace.as_bytes(), || false).unwrap();
    let c = h.latencies()[0].counts();
    assert_eq!(
        (c.matched, c.starts_dropped, c.unmatched_ends),
        (128, 72, 72)
    );
    assert_eq!(h.latencies()[0].trigger().snapshot().len(), 128);
}

// ---- bounds and bad input -------------------------------------------------------------------

#[test]
fn a_full_table_drops_exactly_and_keeps_strings_bounded() {
    let mut trace = String::new();
    for i in 0..1000u64 {
        // 300 distinct names, each seen at least three times.
        trace += &format!(
            "  t-{i}  [000] .... 1.{i:06}: sched_switch: prev_comm=x prev_pid=1 next_comm=task{} next_pid={i}\n",
            i % 300
        );
    }
    let h = run(&trace, &["sched_switch:keys=next_comm:size=128".into()]);
    let (rows, (hits, entries, dropped)) = h.tables()[0].rows();
    assert_eq!(entries, 128);
    assert_eq!(hits + dropped, 1000);
    // Each kept name got every one of its events: naive count per kept name.
    for r in &rows {
        let KeyText::Str(name) = &r.key[0] else {
            panic!()
        };
        let n: u64 = name[4..].parse().unwrap();
        let want = (0..1000u64).filter(|i| i % 300 == n).count() as u64;
        assert_eq!(r.hits, want, "{name}");
    }
    let out = render(&h);
    assert!(out.ends_with(&format!(
        "    Hits: {hits}\n    Entries: 128\n    Dropped: {dropped}\n"
    )));
}

#[test]
fn bad_specs_are_typed_and_change_nothing() {
    let mut h = OfflineHist::new();
    h.add_spec("sched_switch:keys=next_pid").unwrap();
    for (spec, want) in [
        ("keys=next_pid", "names no event"),
        ("hist:keys=next_pid", "names no event"),
        ("sched_switch:", "empty hist spec"),
        (
            "sched_switch:keys=next_pid.frob",
            "invalid modifier 'frob' at byte 27",
        ),
        (
            "sched_switch:keys=next_pid:size=100",
            "size must be a power of two",
        ),
        (
            "sched_switch:keys=next_pid:sort=nope",
            "sort key is not hitcount",
        ),
        (
            "sched_switch:keys=next_pid.usecs",
            "invalid modifier 'usecs' at byte 27",
        ),
        ("sched_switch:keys=next_pid:pause", "unknown clause 'pause'"),
        ("a b:keys=x", "names no event"),
    ] {
        let e = h.add_spec(spec).unwrap_err();
        assert!(e.to_string().contains(want), "{spec}: {e}");
        if let OfflineSpecError::Spec(inner) = &e {
            assert!(inner.pos <= spec.len(), "{spec}");
        }
    }
    assert_eq!(h.tables().len(), 1);
    for bad in [
        "",
        "a.b",
        "a.b=c",
        "a=b.c",
        ".x=y.z",
        "a.b=c.d-e",
        "a b.c=d.e",
    ] {
        let e = h.add_latency(bad, 2048).unwrap_err();
        assert!(
            matches!(e, OfflineSpecError::Latency { .. }),
            "{bad}: {e:?}"
        );
        assert!(e.to_string().starts_with("latency spec: "), "{e}");
    }
    assert!(h.add_latency("a.b=c.d", 100).is_err());
    assert!(h.latencies().is_empty());
}

// ---- `if` filters --------------------------------------------------------------------------

/// What the naive side decides for one event: pass, fail, or a skip kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Naive {
    Pass,
    Fail,
    Missing,
    NotNumeric,
}

/// A numeric field's value as a signed number (negative values are written with `-`).
fn naive_signed(name: &str, v: &str) -> Option<i128> {
    let n = naive_number(name, v)?;
    Some(if v.starts_with('-') {
        i128::from(n as i64)
    } else {
        i128::from(n)
    })
}

#[test]
fn filters_over_every_event_trace_match_a_naive_count() {
    let mut checked = 0;
    for path in data_files() {
        let text = fs::read_to_string(&path).unwrap_or_default();
        let mut events: BTreeMap<String, Vec<(u64, NaiveFields)>> = BTreeMap::new();
        for line in text.lines() {
            if let Some((cpu, ev, fields)) = naive_line(line) {
                events.entry(ev).or_default().push((cpu, fields));
            }
        }
        for (ev, lines) in &events {
            let common = [
                "comm",
                "common_comm",
                "cpu",
                "common_cpu",
                "common_pid",
                "common_timestamp",
            ];
            let mut names: Vec<&str> = Vec::new();
            for (_, f) in lines {
                for (n, _) in f {
                    if !names.contains(&n.as_str()) && !common.contains(&n.as_str()) {
                        names.push(n);
                    }
                }
            }
            let cpu0 = lines[0].0;
            let get = |f: &NaiveFields, name: &str| {
                f.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone())
            };
            for name in names {
                // (filter, naive decision per event)
                type Decide<'a> = Box<dyn Fn(u64, &NaiveFields) -> Naive + 'a>;
                let mut cases: Vec<(String, Decide)> = Vec::new();
                let nums: Vec<i128> = lines
                    .iter()
                    .filter_map(|(_, f)| get(f, name).and_then(|v| naive_signed(name, &v)))
                    .collect();
                if !name.ends_with("comm") && !nums.is_empty() {
                    let mut sorted = nums.clone();
                    sorted.sort();
                    let t = sorted[sorted.len() / 2];
                    let num = move |f: &NaiveFields| match get(f, name) {
                        None => Err(Naive::Missing),
                        Some(v) => naive_signed(name, &v).ok_or(Naive::NotNumeric),
                    };
                    let verdict = |b: bool| if b { Naive::Pass } else { Naive::Fail };
                    cases.push((
                        format!("{name} >= {t}"),
                        Box::new(move |_, f| num(f).map_or_else(|e| e, |n| verdict(n >= t))),
                    ));
                    cases.push((
                        format!("{name} < {t} || cpu == {cpu0}"),
                        Box::new(move |cpu, f| {
                            num(f).map_or_else(|e| e, |n| verdict(n < t || cpu == cpu0))
                        }),
                    ));
                    cases.push((
                        format!("!({name} < {t}) && cpu != {cpu0}"),
                        Box::new(move |cpu, f| {
                            num(f).map_or_else(|e| e, |n| verdict(n >= t && cpu != cpu0))
                        }),
                    ));
                }
                let first = lines.iter().find_map(|(_, f)| get(f, name));
                if let Some(v0) = first
                    && (name.ends_with("comm") || naive_number(name, &v0).is_none())
                    && !v0.contains(['"', '*', '?', '[', '\\'])
                {
                    let p: String = v0.chars().take(1).collect();
                    cases.push((
                        format!("{name} ~ \"{p}*\""),
                        Box::new(move |_, f| match get(f, name) {
                            None => Naive::Missing,
                            Some(v) if v.starts_with(p.as_str()) => Naive::Pass,
                            Some(_) => Naive::Fail,
                        }),
                    ));
                    let v1 = v0.clone();
                    cases.push((
                        format!("{name} == \"{v0}\""),
                        Box::new(move |_, f| match get(f, name) {
                            None => Naive::Missing,
                            Some(v) if v == v1 => Naive::Pass,
                            Some(_) => Naive::Fail,
                        }),
                    ));
                }
                for (filter, decide) in &cases {
                    let spec = format!("{ev}:keys=cpu:size=131072 if {filter}");
                    let h = run(&text, std::slice::from_ref(&spec));
                    let t = &h.tables()[0];
                    let mut want: BTreeMap<String, u64> = BTreeMap::new();
                    let (mut missing, mut not_numeric, mut filtered) = (0, 0, 0);
                    for (cpu, f) in lines {
                        match decide(*cpu, f) {
                            Naive::Pass => *want.entry(cpu.to_string()).or_default() += 1,
                            Naive::Fail => filtered += 1,
                            Naive::Missing => missing += 1,
                            Naive::NotNumeric => not_numeric += 1,
                        }
                    }
                    let (rows, _) = t.rows();
                    let got: BTreeMap<String, u64> = rows
                        .iter()
                        .map(|r| (key_string(&r.key[0]), r.hits))
                        .collect();
                    let ctx = format!("{}: {spec}", path.display());
                    assert_eq!(got, want, "{ctx}");
                    let sk = t.skipped();
                    assert_eq!(
                        (sk.missing_field, sk.not_numeric, sk.filtered),
                        (missing, not_numeric, filtered),
                        "{ctx}"
                    );
                    assert!(t.info().ends_with(&format!(" if {filter}")), "{ctx}");
                    checked += 1;
                }
            }
        }
    }
    assert!(checked >= 50, "filters checked: {checked}");
}

#[test]
fn filtered_table_shows_the_filter_and_counts_what_it_kept_out() {
    let trace = "\
  bash-10  [000] .... 1.000001: kmalloc: call_site=c0ffee ptr=0 bytes_req=8 bytes_alloc=8
  bash-10  [001] .... 1.000002: kmalloc: call_site=c0ffee ptr=0 bytes_req=300 bytes_alloc=512
  zsh-11   [000] .... 1.000003: kmalloc: call_site=beef ptr=0 bytes_req=1024 bytes_alloc=1024
  zsh-11   [000] .... 1.000004: kmalloc: call_site=beef ptr=0 bytes_alloc=1024
";
    let h = run(
        trace,
        &["kmalloc:hist:keys=call_site:vals=bytes_req if bytes_req > 256".into()],
    );
    let out = render(&h);
    assert!(
        out.starts_with(
            "# event histogram\n#\n# trigger info: hist:keys=call_site:vals=hitcount,bytes_req:sort=hitcount:size=2048 if bytes_req > 256 [active]\n#\n\n"
        ),
        "{out}"
    );
    let t = &h.tables()[0];
    let (rows, (hits, entries, dropped)) = t.rows();
    assert_eq!((hits, entries, dropped), (2, 2, 0));
    assert_eq!(
        rows.iter().map(|r| (r.hits, r.vals[0])).collect::<Vec<_>>(),
        [(1, 1024), (1, 300)]
    );
    let sk = t.skipped();
    assert_eq!((sk.filtered, sk.missing_field, sk.not_numeric), (1, 1, 0));
    assert!(
        h.report()
            .contains("kmalloc: 4 events, 1 without a spec field, 0 not numeric, 1 filtered out"),
        "{}",
        h.report()
    );
    // `&&` binds tighter than `||`: bash's 8-byte request passes through the `||` side only.
    let h = run(
        trace,
        &["kmalloc:keys=comm if bytes_req < 100 || comm ~ \"z*\" && bytes_req > 1000".into()],
    );
    let (rows, _) = h.tables()[0].rows();
    assert_eq!(
        rows.iter()
            .map(|r| (key_string(&r.key[0]), r.hits))
            .collect::<Vec<_>>(),
        [("bash".to_owned(), 1), ("zsh".to_owned(), 1)]
    );
    assert_eq!(h.tables()[0].skipped().filtered, 1);
}

#[test]
fn bad_filters_are_typed_and_change_nothing() {
    let mut h = OfflineHist::new();
    for (spec, want) in [
        (
            "kmalloc:keys=x if",
            "invalid filter expression 'if' at byte 17",
        ),
        (
            "kmalloc:keys=x if  ",
            "invalid filter expression 'if' at byte 17",
        ),
        (
            "kmalloc:keys=x if comm > 3",
            "invalid operator for the field's type '>' at byte 23",
        ),
        (
            "kmalloc:keys=x if bytes_req > big",
            "invalid filter value 'big' at byte 30",
        ),
        (
            "kmalloc:keys=x if (a == 1",
            "invalid filter expression '' at byte 25",
        ),
        (
            "kmalloc:keys=x if a == 1 b",
            "invalid filter expression 'b' at byte 25",
        ),
        (
            "kmalloc:keys=x if common_flags == 1",
            "unknown field 'common_flags' at byte 18",
        ),
        (
            "kmalloc:keys=x if comm == \"bash",
            "invalid filter value '\"bash' at byte 26",
        ),
        (
            "kmalloc:keys=x.nope if a == 1",
            "invalid modifier 'nope' at byte 15",
        ),
    ] {
        let e = h.add_spec(spec).unwrap_err();
        assert_eq!(e.to_string(), want, "{spec}");
    }
    let deep = format!(
        "kmalloc:keys=x if {}a == 1{}",
        "(".repeat(33),
        ")".repeat(33)
    );
    assert!(
        h.add_spec(&deep)
            .unwrap_err()
            .to_string()
            .contains("nested too deep")
    );
    assert!(h.tables().is_empty());
}

// ---- no panic on arbitrary input ---------------------------------------------------------

mod arbitrary {
    use proptest::prelude::*;
    use tracestat::trace::hist::OfflineHist;

    const SAMPLES: &[&str] = &[
        "     kworker/0:1-59    [000] d..3   136.677025: sched_switch: prev_comm=kworker/0:1 prev_pid=59 prev_prio=120 prev_state=S ==> next_comm=bash next_pid=1998 next_prio=120",
        "  <idle>-0       2d.h4    1us : sched_waking: comm=sleep pid=5882 prio=94 success=1 target_cpu=002",
        "bash-1234  [001]  1234.567890: sched_switch: bash:1234 [120] S ==> swapper/1:0 [120]",
        "           cksum-12994 [000] d... 7269913.317924: block_rq_issue: 202,1 R 0 () 9357056 + 72 [cksum]",
        "       trace-cmd-16131 [000] 158126.498411: kmalloc: call_site=811223c5 ptr=0xffff88003ecf2b40 bytes_req=272",
    ];

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// Sample lines with bytes replaced, inserted or cut, through every spec kind.
        #[test]
        fn mutated_lines_never_panic(
            picks in proptest::collection::vec((0..SAMPLES.len(), 0usize..200, any::<u8>(), 0u8..3), 1..20),
            spec in "[a-z_=:.,0-9]{0,40}",
            latency in "[a-z_=.]{0,30}",
            filter in "[a-z_ ()!&|<>=~\"'*?0-9-]{0,40}",
        ) {
            let mut trace = Vec::new();
            for (i, at, byte, op) in picks {
                let mut line = SAMPLES[i].as_bytes().to_vec();
                let at = at.min(line.len());
                match op {
                    0 => line.insert(at, byte),
                    1 if at < line.len() => line[at] = byte,
                    _ => line.truncate(at),
                }
                trace.extend(line);
                trace.push(b'\n');
            }
            let mut h = OfflineHist::new();
            let _ = h.add_spec(&format!("sched_switch:{spec}"));
            let _ = h.add_spec("sched_switch:keys=next_comm.sym,prev_pid.execname:vals=next_prio");
            let _ = h.add_spec("kmalloc:keys=call_site.sym-offset,bytes_req.log2:vals=bytes_req");
            let _ = h.add_spec("block_rq_issue:keys=dev,rwbs:vals=nr_sector:size=128");
            let _ = h.add_spec(&format!("sched_switch:keys=next_pid if {filter}"));
            let _ = h.add_spec("sched_switch:keys=prev_comm if prev_pid < 100 || next_comm ~ \"b*\" && !(cpu == 1)");
            let _ = h.add_latency(&latency, 128);
            let _ = h.add_latency("sched_waking.pid=sched_switch.next_pid", 128);
            h.read(&trace[..], || false).unwrap();
            // Every line counted once, as one of the five kinds an offline hist tells apart.
            let l = h.lines();
            prop_assert_eq!(l.lines(), trace.iter().filter(|&&b| b == b'\n').count() as u64);
            use tracestat::trace::LineKind::*;
            let five = [Blank, Header, TraceEvent, Unrecognized, Overlong, InvalidUtf8];
            prop_assert!(l.iter().all(|(k, n)| n == 0 || five.contains(&k)), "{l:?}");
            let mut s = String::new();
            h.render(&mut s).unwrap();
            for t in h.tables() {
                let (rows, (hits, entries, dropped)) = t.rows();
                prop_assert_eq!(rows.len(), entries);
                let sk = t.skipped();
                prop_assert_eq!(
                    hits + dropped + sk.missing_field + sk.not_numeric + sk.filtered,
                    t.events()
                );
            }
        }
    }
}

#[test]
fn string_sort_keys_and_bucket_histograms() {
    let data = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/ftrace-events-instances.txt"
    );
    let text = fs::read_to_string(data).unwrap();
    let h = run(
        &text,
        &[
            "sched_switch:keys=prev_state:sort=prev_state.descending".into(),
            "sched_wakeup:keys=target_cpu:vals=prio:hist=prio.lhist(0,200,50):sort=target_cpu"
                .into(),
        ],
    );
    let out = render(&h);
    let rows: Vec<&str> = out.lines().filter(|l| l.starts_with('{')).collect();
    assert_eq!(
        rows,
        [
            format!("{{ prev_state: {:<50} }} hitcount:          2", "S"),
            format!("{{ prev_state: {:<50} }} hitcount:          1", "R+"),
            format!("{{ prev_state: {:<50} }} hitcount:          1", "R"),
            "{ target_cpu:          0 } hitcount:          4  prio:        480".into(),
            "{ target_cpu:          1 } hitcount:          1  prio:        120".into(),
            "{ target_cpu:          3 } hitcount:          1  prio:        120".into(),
        ]
    );
    assert!(
        out.contains(&format!("[100, 150){:>14} |{}|\n", 4, "@".repeat(52))),
        "{out}"
    );
}
