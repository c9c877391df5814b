//! Figures sized for the model: the long side at most 1568 px, re-encoded as PNG.
//!
//! Claude's API refuses images over 8000 px, and over 2000 px when a request holds many, and
//! scales anything larger than about 1568 px down anyway; sending more only spends the result
//! budget. The PNG bytes come from the guest, so decoding is bounded in size and memory.

use std::io::Cursor;

use image::{DynamicImage, ImageFormat, ImageReader, Limits};

/// Longest side of an inline figure.
pub const MAX_SIDE: u32 = 1568;
/// Smallest long side a figure is shrunk to while fitting the budget: a thumbnail still shows
/// what a figure is (a noisy heat map needs this small to fit Claude's limits); smaller shows
/// nothing.
const MIN_SIDE: u32 = 96;
/// Largest picture decoded at all (a PNG header may claim anything).
const MAX_DECODE_SIDE: u32 = 16_384;
const MAX_DECODE_BYTES: u64 = 512 << 20;

#[derive(Debug, thiserror::Error)]
pub enum FigureError {
    #[error("it is not a PNG image that can be read: {0}")]
    Decode(#[source] image::ImageError),
    #[error("it could not be encoded as PNG: {0}")]
    Encode(#[source] png::EncodingError),
}

/// The long side a PNG's header gives (its IHDR chunk), without decoding it; `None` for bytes
/// that do not start as a PNG does.
pub fn png_long_side(png: &[u8]) -> Option<u32> {
    const SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";
    if png.len() < 24 || &png[..8] != SIGNATURE || &png[12..16] != b"IHDR" {
        return None;
    }
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    Some(be(&png[16..20]).max(be(&png[20..24])))
}

/// A decoded figure, ready to be encoded at any size at most its own.
pub struct Figure {
    image: DynamicImage,
}

impl Figure {
    pub fn decode(png: &[u8]) -> Result<Figure, FigureError> {
        let mut limits = Limits::default();
        limits.max_image_width = Some(MAX_DECODE_SIDE);
        limits.max_image_height = Some(MAX_DECODE_SIDE);
        limits.max_alloc = Some(MAX_DECODE_BYTES);
        let mut reader = ImageReader::with_format(Cursor::new(png), ImageFormat::Png);
        reader.limits(limits);
        let image = reader.decode().map_err(FigureError::Decode)?;
        Ok(Figure { image })
    }

    pub fn long_side(&self) -> u32 {
        self.image.width().max(self.image.height())
    }

    /// PNG bytes with the long side at most `side` (never enlarged).
    /// The figure as a PNG with a palette, its long side at most `side`. A plot's flat colours
    /// and anti-aliased edges survive a palette of 256 colours at a third of the bytes or
    /// less, so figures fit Claude's result limits at their usual size.
    pub fn encode(&self, side: u32) -> Result<Vec<u8>, FigureError> {
        let img = if self.long_side() > side {
            // Triangle (bilinear) keeps lines and text legible at a fraction of Lanczos' cost.
            self.image
                .resize(side, side, image::imageops::FilterType::Triangle)
                .to_rgba8()
        } else {
            self.image.to_rgba8()
        };
        indexed_png(&img)
    }

    /// The largest rendering (long side at most [`MAX_SIDE`], shrinking down to [`MIN_SIDE`])
    /// whose PNG is at most `budget` bytes, if any is, with its long side.
    pub fn fit(&self, budget: usize) -> Result<Option<(Vec<u8>, u32)>, FigureError> {
        let mut side = self.long_side().min(MAX_SIDE);
        loop {
            let png = self.encode(side)?;
            if png.len() <= budget {
                return Ok(Some((png, side)));
            }
            if side <= MIN_SIDE {
                return Ok(None);
            }
            // Bytes scale with area: aim straight at the budget, at least halving the area.
            let ratio = (budget as f64 / png.len() as f64).sqrt().min(0.7);
            side = ((side as f64 * ratio) as u32).max(MIN_SIDE);
        }
    }
}

/// Colours as a palette and each pixel's index in it: exact when the picture has at most 256
/// colours, else NeuQuant's (sampling one pixel in ten).
fn palette_of(rgba: &[u8]) -> (Vec<[u8; 4]>, Vec<u8>) {
    let mut index: std::collections::HashMap<[u8; 4], u8> = std::collections::HashMap::new();
    let mut palette = Vec::new();
    let mut indices = Vec::with_capacity(rgba.len() / 4);
    for p in rgba.chunks_exact(4) {
        let c = [p[0], p[1], p[2], p[3]];
        let i = match index.get(&c) {
            Some(&i) => i,
            None if palette.len() < 256 => {
                let i = palette.len() as u8;
                palette.push(c);
                index.insert(c, i);
                i
            }
            None => return quantized(rgba),
        };
        indices.push(i);
    }
    (palette, indices)
}

fn quantized(rgba: &[u8]) -> (Vec<[u8; 4]>, Vec<u8>) {
    let nq = color_quant::NeuQuant::new(10, 256, rgba);
    let indices = rgba.chunks_exact(4).map(|p| nq.index_of(p) as u8).collect();
    let palette = nq
        .color_map_rgba()
        .chunks_exact(4)
        .map(|c| [c[0], c[1], c[2], c[3]])
        .collect();
    (palette, indices)
}

fn indexed_png(img: &image::RgbaImage) -> Result<Vec<u8>, FigureError> {
    let (palette, indices) = palette_of(img.as_raw());
    let rgb: Vec<u8> = palette.iter().flat_map(|c| [c[0], c[1], c[2]]).collect();
    let alpha: Vec<u8> = palette.iter().map(|c| c[3]).collect();
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, img.width(), img.height());
    enc.set_color(png::ColorType::Indexed);
    enc.set_depth(png::BitDepth::Eight);
    enc.set_palette(rgb);
    if alpha.iter().any(|&a| a != 255) {
        enc.set_trns(alpha);
    }
    enc.set_compression(png::Compression::High);
    let mut writer = enc.write_header().map_err(FigureError::Encode)?;
    writer.write_image_data(&indices).map_err(FigureError::Encode)?;
    writer.finish().map_err(FigureError::Encode)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(w: u32, h: u32, noisy: bool) -> Vec<u8> {
        let mut img = image::RgbImage::new(w, h);
        let mut x: u32 = 12345;
        for p in img.pixels_mut() {
            if noisy {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                *p = image::Rgb([(x >> 16) as u8, (x >> 8) as u8, x as u8]);
            } else {
                *p = image::Rgb([255, 255, 255]);
            }
        }
        let mut out = Cursor::new(Vec::new());
        DynamicImage::ImageRgb8(img)
            .write_to(&mut out, ImageFormat::Png)
            .unwrap();
        out.into_inner()
    }

    fn dims(png: &[u8]) -> (u32, u32) {
        let f = Figure::decode(png).unwrap();
        (f.image.width(), f.image.height())
    }

    #[test]
    fn large_figures_are_scaled_to_the_long_side() {
        let f = Figure::decode(&png(3000, 1500, false)).unwrap();
        let (out, side) = f.fit(usize::MAX).unwrap().unwrap();
        assert_eq!(dims(&out), (1568, 784));
        assert_eq!(side, 1568);
        let small = Figure::decode(&png(640, 480, false)).unwrap();
        assert_eq!(dims(&small.fit(usize::MAX).unwrap().unwrap().0), (640, 480));
    }

    #[test]
    fn noisy_figures_shrink_until_they_fit() {
        let f = Figure::decode(&png(2000, 2000, true)).unwrap();
        let (out, _) = f.fit(300_000).unwrap().unwrap();
        assert!(out.len() <= 300_000);
        assert!(dims(&out).0 >= MIN_SIDE);
        assert!(f.fit(1000).unwrap().is_none(), "nothing fits 1000 bytes");
    }

    #[test]
    fn the_header_gives_the_long_side_without_decoding() {
        assert_eq!(png_long_side(&png(640, 480, false)), Some(640));
        assert_eq!(png_long_side(&png(300, 2000, false)), Some(2000));
        assert_eq!(png_long_side(b"not a png at all, though long enough"), None);
        assert_eq!(
            png_long_side(&png(640, 480, false)[..20]),
            None,
            "a cut-off header"
        );
    }

    #[test]
    fn garbage_and_bombs_are_refused() {
        assert!(Figure::decode(b"not a png").is_err());
        // A valid header claiming 100000 x 100000 pixels.
        let mut bomb = png(1, 1, false);
        bomb[16..20].copy_from_slice(&100_000u32.to_be_bytes());
        bomb[20..24].copy_from_slice(&100_000u32.to_be_bytes());
        assert!(Figure::decode(&bomb).is_err());
    }
}
