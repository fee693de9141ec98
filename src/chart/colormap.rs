//! Perceptual sequential colour maps for heatmaps (issue 4 §2 error heatmap, §3 attention
//! heatmap): equal steps in value look like equal steps in colour, lightness rises
//! monotonically (so the map survives greyscale printing and colour-vision deficiencies), and
//! both ends stay distinct from a white and from a near-black page background.

use std::sync::OnceLock;

/// A sequential colour map, sampled as a 256-entry lookup table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Colormap {
    /// viridis (van der Walt & Smith, matplotlib's default): dark purple -> teal -> yellow.
    #[default]
    Viridis,
    /// cividis (Nuñez, Anderton & Renslow 2018): dark blue -> grey -> yellow, optimised for
    /// deuteranomaly and protanomaly.
    Cividis,
}

/// viridis, 256 colours as `rrggbb` hex (matplotlib's table, 8-bit; as published in
/// d3-scale-chromatic).
const VIRIDIS_HEX: &str = "\
    44015444025645045745055946075a46085c460a5d460b5e470d60470e61471063471164471365481467481668481769\
    48186a481a6c481b6d481c6e481d6f481f70482071482173482374482475482576482677482878482979472a7a472c7a\
    472d7b472e7c472f7d46307e46327e46337f463480453581453781453882443983443a83443b84433d84433e85423f85\
    4240864241864142874144874045884046883f47883f48893e49893e4a893e4c8a3d4d8a3d4e8a3c4f8a3c508b3b518b\
    3b528b3a538b3a548c39558c39568c38588c38598c375a8c375b8d365c8d365d8d355e8d355f8d34608d34618d33628d\
    33638d32648e32658e31668e31678e31688e30698e306a8e2f6b8e2f6c8e2e6d8e2e6e8e2e6f8e2d708e2d718e2c718e\
    2c728e2c738e2b748e2b758e2a768e2a778e2a788e29798e297a8e297b8e287c8e287d8e277e8e277f8e27808e26818e\
    26828e26828e25838e25848e25858e24868e24878e23888e23898e238a8d228b8d228c8d228d8d218e8d218f8d21908d\
    21918c20928c20928c20938c1f948c1f958b1f968b1f978b1f988b1f998a1f9a8a1e9b8a1e9c891e9d891f9e891f9f88\
    1fa0881fa1881fa1871fa28720a38620a48621a58521a68522a78522a88423a98324aa8325ab8225ac8226ad8127ad81\
    28ae8029af7f2ab07f2cb17e2db27d2eb37c2fb47c31b57b32b67a34b67935b77937b87838b9773aba763bbb753dbc74\
    3fbc7340bd7242be7144bf7046c06f48c16e4ac16d4cc26c4ec36b50c46a52c56954c56856c66758c7655ac8645cc863\
    5ec96260ca6063cb5f65cb5e67cc5c69cd5b6ccd5a6ece5870cf5773d05675d05477d1537ad1517cd2507fd34e81d34d\
    84d44b86d54989d5488bd6468ed64590d74393d74195d84098d83e9bd93c9dd93ba0da39a2da37a5db36a8db34aadc32\
    addc30b0dd2fb2dd2db5de2bb8de29bade28bddf26c0df25c2df23c5e021c8e020cae11fcde11dd0e11cd2e21bd5e21a\
    d8e219dae319dde318dfe318e2e418e5e419e7e419eae51aece51befe51cf1e51df4e61ef6e620f8e621fbe723fde725";

impl Colormap {
    /// The 256-entry RGB lookup table: entry `i` is the colour of `t = i / 255`.
    pub fn lut(self) -> &'static [[u8; 3]; 256] {
        static VIRIDIS: OnceLock<[[u8; 3]; 256]> = OnceLock::new();
        static CIVIDIS: OnceLock<[[u8; 3]; 256]> = OnceLock::new();
        match self {
            Colormap::Viridis => VIRIDIS.get_or_init(viridis_lut),
            Colormap::Cividis => CIVIDIS.get_or_init(cividis_lut),
        }
    }

    /// The colour of `t` in `[0, 1]` (clamped; NaN gives the low end).
    pub fn color(self, t: f32) -> [u8; 3] {
        let i = if t.is_nan() {
            0
        } else {
            (t.clamp(0.0, 1.0) * 255.0).round() as usize
        };
        self.lut()[i.min(255)]
    }
}

fn hex_digit(b: u8) -> u8 {
    match b {
        b'0'..=b'9' => b - b'0',
        b'a'..=b'f' => b - b'a' + 10,
        b'A'..=b'F' => b - b'A' + 10,
        _ => 0,
    }
}

fn viridis_lut() -> [[u8; 3]; 256] {
    let mut lut = [[0u8; 3]; 256];
    let bytes = VIRIDIS_HEX.as_bytes();
    for (entry, hex) in lut.iter_mut().zip(bytes.chunks_exact(6)) {
        for (c, pair) in entry.iter_mut().zip(hex.chunks_exact(2)) {
            *c = hex_digit(pair[0]) * 16 + hex_digit(pair[1]);
        }
    }
    lut
}

/// cividis from d3-scale-chromatic's degree-5 polynomial fit of the published table (close,
/// not exact: the top end is `(253, 234, 69)` against `#fee838`), evaluated once.
fn cividis_lut() -> [[u8; 3]; 256] {
    let poly = |t: f64, c: [f64; 6]| -> u8 {
        let v = c[0] + t * (c[1] + t * (c[2] + t * (c[3] + t * (c[4] + t * c[5]))));
        v.round().clamp(0.0, 255.0) as u8
    };
    let mut lut = [[0u8; 3]; 256];
    for (i, entry) in lut.iter_mut().enumerate() {
        let t = i as f64 / 255.0;
        *entry = [
            poly(t, [-4.54, -35.34, 2381.73, -6402.7, 7024.72, -2710.57]),
            poly(t, [32.49, 170.73, 52.82, -131.46, 176.58, -67.37]),
            poly(t, [81.24, 442.36, -2482.43, 6167.24, -6614.94, 2475.67]),
        ];
    }
    lut
}

#[cfg(test)]
mod tests {
    use super::*;

    fn luminance(c: [u8; 3]) -> f64 {
        0.2126 * f64::from(c[0]) + 0.7152 * f64::from(c[1]) + 0.0722 * f64::from(c[2])
    }

    #[test]
    fn viridis_table_matches_matplotlib() {
        assert_eq!(VIRIDIS_HEX.len(), 256 * 6);
        let lut = Colormap::Viridis.lut();
        assert_eq!(lut[0], [0x44, 0x01, 0x54]);
        // matplotlib _viridis_data[64] = (0.229739, 0.322361, 0.545706)
        assert_eq!(lut[64], [59, 82, 139]);
        assert_eq!(lut[255], [0xfd, 0xe7, 0x25]);
    }

    #[test]
    fn cividis_ends() {
        let lut = Colormap::Cividis.lut();
        // published cividis: #00224e ... #fee838
        assert!(lut[0][0] <= 2 && (30..=36).contains(&lut[0][1]) && (76..=82).contains(&lut[0][2]));
        assert!(lut[255][0] >= 250 && lut[255][1] >= 228 && lut[255][2] <= 75);
    }

    #[test]
    fn lightness_rises() {
        for cm in [Colormap::Viridis, Colormap::Cividis] {
            let lut = cm.lut();
            let l: Vec<f64> = lut.iter().map(|&c| luminance(c)).collect();
            for w in l.windows(16).step_by(16) {
                assert!(w[15] > w[0], "{cm:?} lightness must rise");
            }
            assert_eq!(cm.color(f32::NAN), lut[0]);
            assert_eq!(cm.color(2.0), lut[255]);
        }
    }
}
