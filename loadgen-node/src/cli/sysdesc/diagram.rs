//! A starting point for the system diagram the rules require (`sysdesc
//! --diagram FILE`): an SVG drawn from what was measured — the LoadGen
//! node and its data-path interfaces, the fabric between, each SUT machine
//! (hosts counted once) with its interfaces and the nodes it runs. What
//! lies inside the fabric (switches, cables) only the submitter knows: the
//! drawing says so where it goes.

use std::fmt::Write;

use super::template::Host;

/// What the drawing shows of the LoadGen side.
pub(crate) struct LoadgenSide<'a> {
    pub(crate) hostname: &'a str,
    /// Its data-path interfaces, as "name (speed, MTU)".
    pub(crate) nics: &'a [String],
    /// The protocol stack on the wire.
    pub(crate) protocol: &'a str,
}

const BOX_W: u32 = 320;
const LINE_H: u32 = 20;
const GAP: u32 = 24;
const LEFT_X: u32 = 20;
const FABRIC_X: u32 = 420;
const RIGHT_X: u32 = 560;

/// The SVG text.
pub(crate) fn svg(loadgen: &LoadgenSide<'_>, hosts: &[Host<'_>]) -> String {
    let host_lines: Vec<Vec<String>> = hosts.iter().map(host_text).collect();
    let heights: Vec<u32> = host_lines.iter().map(|l| box_height(l.len())).collect();
    let right_total: u32 = heights.iter().sum::<u32>() + GAP * hosts.len().saturating_sub(1) as u32;
    let mut left_lines = vec![format!("LoadGen node: {}", loadgen.hostname)];
    left_lines.push("official LoadGen + netdiv QDL".into());
    left_lines.extend(loadgen.nics.iter().map(|n| format!("NIC {n}")));
    let left_h = box_height(left_lines.len());
    let height = right_total.max(left_h) + 2 * GAP + 60;
    let top = GAP + 40;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{height}" font-family="sans-serif" font-size="13">"#,
        RIGHT_X + BOX_W + LEFT_X
    );
    let _ = writeln!(
        out,
        r#"<text x="{LEFT_X}" y="{}" font-size="15" font-weight="bold">{}</text>"#,
        GAP,
        escape(&format!("Network division system: {}", loadgen.protocol))
    );
    let left_y = top + (right_total.max(left_h) - left_h) / 2;
    draw_box(&mut out, LEFT_X, left_y, left_h, &left_lines);
    // The fabric: one bar, named for the person to complete.
    let fabric_h = right_total.max(left_h);
    let _ = writeln!(
        out,
        r##"<rect x="{}" y="{top}" width="40" height="{fabric_h}" fill="#dde7f3" stroke="#345"/>"##,
        FABRIC_X - 20
    );
    let _ = writeln!(
        out,
        r#"<text x="{FABRIC_X}" y="{}" text-anchor="middle" transform="rotate(-90 {FABRIC_X} {})">{}</text>"#,
        top + fabric_h / 2,
        top + fabric_h / 2,
        escape("network fabric: TODO switches, cables, media")
    );
    link(&mut out, LEFT_X + BOX_W, left_y + left_h / 2, FABRIC_X - 20);
    let mut y = top;
    for (lines, h) in host_lines.iter().zip(&heights) {
        draw_box(&mut out, RIGHT_X, y, *h, lines);
        link(&mut out, FABRIC_X + 20, y + h / 2, RIGHT_X);
        y += h + GAP;
    }
    out.push_str("</svg>\n");
    out
}

/// A SUT machine's lines: its name, interfaces, then its nodes.
fn host_text(host: &Host<'_>) -> Vec<String> {
    let first = host.nodes[0];
    let name = if first.hostname.is_empty() {
        "SUT machine".to_string()
    } else {
        format!("SUT machine: {}", first.hostname)
    };
    let mut lines = vec![name];
    if let Some(hw) = &first.hardware {
        if !hw.accelerators.is_empty() {
            lines.push(format!(
                "{} x {}",
                hw.accelerators.len(),
                hw.accelerators[0]
            ));
        }
    }
    lines.extend(host.data_path_nics.iter().map(|n| format!("NIC {n}")));
    lines.extend(
        host.nodes
            .iter()
            .map(|n| format!("sut-node {} ({} backend)", n.name, n.backend)),
    );
    lines
}

fn box_height(lines: usize) -> u32 {
    lines as u32 * LINE_H + 16
}

fn draw_box(out: &mut String, x: u32, y: u32, h: u32, lines: &[String]) {
    let _ = writeln!(
        out,
        r##"<rect x="{x}" y="{y}" width="{BOX_W}" height="{h}" rx="6" fill="#f7f7f7" stroke="#333"/>"##
    );
    for (i, line) in lines.iter().enumerate() {
        let weight = if i == 0 { r#" font-weight="bold""# } else { "" };
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}"{weight}>{}</text>"#,
            x + 10,
            y + 22 + i as u32 * LINE_H,
            escape(line)
        );
    }
}

fn link(out: &mut String, x1: u32, y: u32, x2: u32) {
    let _ = writeln!(
        out,
        r##"<line x1="{x1}" y1="{y}" x2="{x2}" y2="{y}" stroke="#345" stroke-width="2"/>"##
    );
}

/// Text safe inside an SVG element.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::super::template::hosts;
    use super::*;
    use netdiv_proto::pb;

    #[test]
    fn every_machine_interface_and_node_is_drawn_once() {
        let node = |name: &str, host: &str| pb::NodeInfo {
            name: name.into(),
            hostname: host.into(),
            backend: "openai".into(),
            host: Some(pb::HostIdentity {
                boot_id: format!("boot-{host}"),
                ..Default::default()
            }),
            ..Default::default()
        };
        let nodes = [
            node("gpu0", "srv-a"),
            node("gpu1", "srv-a"),
            node("gpu2", "srv-b<&>"),
        ];
        let nics = [
            vec!["ens1f0 (100 Gb/s, MTU 9000)".to_string()],
            vec!["ens1f0 (100 Gb/s, MTU 9000)".to_string()],
            vec!["ens2 (100 Gb/s, MTU 9000)".to_string()],
        ];
        let hosts = hosts(&nodes, &nics);
        let svg = svg(
            &LoadgenSide {
                hostname: "lg",
                nics: &["eth0 (100 Gb/s, MTU 9000)".to_string()],
                protocol: "gRPC over TCP",
            },
            &hosts,
        );
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("SUT machine:").count(), 2, "{svg}");
        assert_eq!(svg.matches("NIC ens1f0").count(), 1, "{svg}");
        for want in [
            "sut-node gpu0",
            "sut-node gpu1",
            "sut-node gpu2",
            "LoadGen node: lg",
            "NIC eth0",
        ] {
            assert!(svg.contains(want), "{want}: {svg}");
        }
        // Names are escaped, not markup.
        assert!(svg.contains("srv-b&lt;&amp;&gt;"), "{svg}");
        // One link from the LoadGen node, one per machine.
        assert_eq!(svg.matches("<line").count(), 3);
    }
}
