//! Figures sized for the model: the long side at most 1568 px, re-encoded as PNG.
//!
//! Claude's API refuses images over 8000 px, and over 2000 px when a request holds many, and
//! scales anything larger than about 1568 px down anyway; sending more only spends the result
//! budget. The PNG bytes come from the guest, so decoding is bounded in size and memory.

use std::io::Cursor;

use image::{DynamicImage, ImageBuffer};

use crate::sandbox::png::{self as png_header, NotAFigure};

/// Longest side of an inline figure.
pub const MAX_SIDE: u32 = 1568;
/// Smallest long side a figure is shrunk to while fitting the budget: a thumbnail still shows
/// what a figure is (a noisy heat map needs this small to fit Claude's limits); smaller shows
/// nothing.
const MIN_SIDE: u32 = 96;
/// Most pixels decoded for one figure (6000 x 4000; 96 MiB as RGBA). A PNG compresses a flat
/// picture a thousandfold, so its header, not its size, says what decoding costs: a 300 KB
/// black square of 16384 px would take 1 GiB. A larger figure is kept as a file, not shown.
const MAX_DECODE_PIXELS: u64 = 24_000_000;
/// What the decoder may allocate besides the picture (its rows and chunk buffers).
const DECODER_SLACK: usize = 4 << 20;

/// Figures decoded at once in the whole process. Decoding is where shaping a result spends
/// memory, and many calls may end together: two at a time bounds it (about 2 x 96 MiB) however
/// many sandboxes draw. Held across the blocking work, so callers acquire it before.
pub static DECODING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);

#[derive(Debug, thiserror::Error)]
pub enum FigureError {
    #[error("{0}")]
    Header(#[from] NotAFigure),
    #[error("it is {0}x{1} pixels, more than the {MAX_DECODE_PIXELS} pixels a figure may have to be shrunk")]
    TooLarge(u32, u32),
    #[error("it is not a PNG image that can be read: {0}")]
    Decode(#[from] png::DecodingError),
    #[error("it is not a PNG image that can be read: its pixels do not match its header")]
    Shape,
    #[error("it could not be encoded as PNG: {0}")]
    Encode(#[source] png::EncodingError),
}

/// The long side a PNG's header gives (its IHDR chunk), without decoding it; `None` for bytes
/// that do not start as a PNG does.
pub fn png_long_side(png: &[u8]) -> Option<u32> {
    png_header::check(png).ok().map(|(w, h)| w.max(h))
}

/// A decoded figure at most [`MAX_SIDE`] on its long side, ready to be encoded at any size at
/// most that. The full-size pixels are dropped as soon as they are shrunk.
pub struct Figure {
    image: DynamicImage,
    /// The long side of the picture as drawn.
    drawn_side: u32,
}

impl Figure {
    /// Decodes a PNG within a bound fixed before anything is inflated; ancillary chunks
    /// (colour profiles, text) are skipped, since a 1x1 picture may carry a profile that
    /// inflates to hundreds of MiB and nothing here uses one.
    pub fn decode(png: &[u8]) -> Result<Figure, FigureError> {
        let (w, h) = png_header::check(png)?;
        if u64::from(w) * u64::from(h) > MAX_DECODE_PIXELS {
            return Err(FigureError::TooLarge(w, h));
        }
        let limits = png::Limits {
            bytes: (MAX_DECODE_PIXELS * 4) as usize + DECODER_SLACK,
        };
        let mut decoder = png::Decoder::new_with_limits(Cursor::new(png), limits);
        decoder.set_ignore_iccp_chunk(true);
        decoder.set_ignore_text_chunk(true);
        decoder.set_transformations(png::Transformations::normalize_to_color8());
        let mut reader = decoder.read_info()?;
        let size = reader.output_buffer_size().ok_or(FigureError::Shape)?;
        let mut buf = vec![0; size];
        let info = reader.next_frame(&mut buf)?;
        buf.truncate(info.buffer_size());
        let image = pixels(info.width, info.height, info.color_type, buf)?;
        let drawn_side = w.max(h);
        // Area sampling in integers: no float copy of the full-size picture.
        let image = if drawn_side > MAX_SIDE {
            image.thumbnail(MAX_SIDE, MAX_SIDE)
        } else {
            image
        };
        Ok(Figure { image, drawn_side })
    }

    /// The long side of the picture as it was drawn.
    pub fn long_side(&self) -> u32 {
        self.drawn_side
    }

    /// The long side it is shown at, at most.
    fn shown_side(&self) -> u32 {
        self.image.width().max(self.image.height())
    }

    /// The figure as a PNG with a palette, its long side at most `side` (never enlarged). A
    /// plot's flat colours and anti-aliased edges survive a palette of 256 colours at a third
    /// of the bytes or less, so figures fit Claude's result limits at their usual size.
    pub fn encode(&self, side: u32) -> Result<Vec<u8>, FigureError> {
        let img = if self.shown_side() > side {
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
        let mut side = self.shown_side();
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

/// Decoded 8-bit pixels as an image of their colour type.
fn pixels(w: u32, h: u32, color: png::ColorType, buf: Vec<u8>) -> Result<DynamicImage, FigureError> {
    let image = match color {
        png::ColorType::Grayscale => ImageBuffer::from_raw(w, h, buf).map(DynamicImage::ImageLuma8),
        png::ColorType::GrayscaleAlpha => ImageBuffer::from_raw(w, h, buf).map(DynamicImage::ImageLumaA8),
        png::ColorType::Rgb => ImageBuffer::from_raw(w, h, buf).map(DynamicImage::ImageRgb8),
        png::ColorType::Rgba => ImageBuffer::from_raw(w, h, buf).map(DynamicImage::ImageRgba8),
        // Expanded away by the decoder's transformations.
        png::ColorType::Indexed => None,
    };
    image.ok_or(FigureError::Shape)
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
    use image::ImageFormat;

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

    /// A valid PNG of `w` x `h` black RGBA pixels at 16 bits, written row by row so the test
    /// never holds the picture, with `extra` chunks before the pixels.
    fn black(w: u32, h: u32, extra: &[(png::chunk::ChunkType, Vec<u8>)]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgba);
        enc.set_depth(png::BitDepth::Sixteen);
        enc.set_compression(png::Compression::Fast);
        let mut writer = enc.write_header().unwrap();
        for (kind, data) in extra {
            writer.write_chunk(*kind, data).unwrap();
        }
        let mut stream = writer.stream_writer().unwrap();
        let row = vec![0u8; w as usize * 8];
        for _ in 0..h {
            std::io::Write::write_all(&mut stream, &row).unwrap();
        }
        stream.finish().unwrap();
        writer.finish().unwrap();
        out
    }

    #[test]
    fn a_huge_flat_picture_is_refused_from_its_header_before_anything_is_inflated() {
        let mut square = black(64, 64, &[]);
        // The header now claims 16384 x 16384 (1 GiB as RGBA): refused by arithmetic alone.
        square[16..20].copy_from_slice(&16_384u32.to_be_bytes());
        square[20..24].copy_from_slice(&16_384u32.to_be_bytes());
        let err = Figure::decode(&square).err().expect("refused");
        assert!(matches!(err, FigureError::TooLarge(16_384, 16_384)), "{err}");
    }

    #[test]
    fn large_sixteen_bit_figures_are_kept_only_at_the_shown_size() {
        let f = Figure::decode(&black(5000, 2500, &[])).unwrap();
        assert_eq!(f.long_side(), 5000, "the drawn size is remembered");
        assert_eq!((f.image.width(), f.image.height()), (1568, 784));
        assert_eq!(f.image.color().bytes_per_pixel(), 4, "16 bits are stripped to 8");
    }

    #[test]
    fn a_colour_profile_bomb_is_skipped_not_inflated() {
        // An iCCP chunk whose profile inflates to 128 MiB of zeros, past the decoder's whole
        // allowance: decoding succeeds only because the chunk is never inflated.
        let mut profile = b"bomb\0\0".to_vec();
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..128 {
            std::io::Write::write_all(&mut z, &zeros).unwrap();
        }
        profile.extend(z.finish().unwrap());
        let png = black(1, 1, &[(png::chunk::iCCP, profile)]);
        let f = Figure::decode(&png).expect("decoded without its profile");
        assert_eq!(f.long_side(), 1);
    }
}
