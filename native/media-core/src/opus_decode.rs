//! Opus decoding of a WebRTC caller's microphone, straight to what the server's VAD and speech
//! recognition take: mono PCM16 at 24 kHz (libopus resamples and downmixes inside the decoder, so
//! a 48 kHz stereo stream costs nothing extra). One `OpusDecoder` per call; it keeps the codec's
//! state between packets, which is what makes packet-loss concealment sound right.
//!
//! libopus (Debian's libopus0; `libopus-dev` to link) through a small FFI of its decoder API.
//! Invariants: a corrupt packet is an error, never a panic or a read out of bounds; the decoder's
//! memory is freed on drop; one decoder is used by one thread at a time (it is `Send`, not `Sync`).

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_uchar};
use std::ptr::NonNull;

/// The rate and channel count the decoder produces (the server's input audio format).
pub const DECODE_RATE_HZ: i32 = 24_000;
const DECODE_CHANNELS: c_int = 1;
/// Opus frames last at most 120 ms: 2880 samples at 24 kHz.
const MAX_FRAME_SAMPLES: usize = (DECODE_RATE_HZ as usize) * 120 / 1000;
/// The concealment length before any packet was decoded: 20 ms, WebRTC's usual packet.
const DEFAULT_FRAME_SAMPLES: usize = (DECODE_RATE_HZ as usize) * 20 / 1000;
const OPUS_OK: c_int = 0;

#[repr(C)]
struct RawDecoder {
    _private: [u8; 0],
}

#[link(name = "opus")]
extern "C" {
    fn opus_decoder_create(fs: i32, channels: c_int, error: *mut c_int) -> *mut RawDecoder;
    fn opus_decode(
        st: *mut RawDecoder,
        data: *const c_uchar,
        len: i32,
        pcm: *mut i16,
        frame_size: c_int,
        decode_fec: c_int,
    ) -> c_int;
    fn opus_decoder_destroy(st: *mut RawDecoder);
    fn opus_strerror(error: c_int) -> *const c_char;
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OpusDecodeError {
    #[error("the Opus decoder could not be created: {0}")]
    Create(String),
    #[error("the Opus packet could not be decoded: {0}")]
    Corrupt(String),
    #[error("an empty Opus packet")]
    Empty,
}

impl OpusDecodeError {
    pub fn code(&self) -> &'static str {
        match self {
            OpusDecodeError::Create(_) => "OPUS_DECODER_UNAVAILABLE",
            OpusDecodeError::Corrupt(_) | OpusDecodeError::Empty => "OPUS_DECODE_FAILED",
        }
    }
}

pub struct OpusDecoder {
    state: NonNull<RawDecoder>,
    /// Samples of the last decoded frame: how much a concealed (lost) packet fills.
    last_frame: usize,
}

// SAFETY: an OpusDecoder state is plain heap memory with no thread affinity; the struct owns it
// exclusively (no aliasing pointers), so moving it to another thread is sound. It is not Sync:
// every method takes `&mut self`.
unsafe impl Send for OpusDecoder {}

impl OpusDecoder {
    pub fn new() -> Result<Self, OpusDecodeError> {
        let mut error: c_int = 0;
        // SAFETY: valid rate and channel count; `error` is a live out-parameter.
        let state = unsafe { opus_decoder_create(DECODE_RATE_HZ, DECODE_CHANNELS, &mut error) };
        match NonNull::new(state) {
            Some(state) if error == OPUS_OK => Ok(OpusDecoder {
                state,
                last_frame: DEFAULT_FRAME_SAMPLES,
            }),
            _ => Err(OpusDecodeError::Create(strerror(error))),
        }
    }

    /// Decodes one packet (one RTP payload).
    pub fn decode(&mut self, packet: &[u8]) -> Result<Vec<i16>, OpusDecodeError> {
        if packet.is_empty() {
            return Err(OpusDecodeError::Empty);
        }
        self.run(packet, false)
    }

    /// Fills one lost packet (packet-loss concealment): the length of the last decoded frame.
    pub fn conceal(&mut self) -> Vec<i16> {
        // A null packet cannot be corrupt; a failure here would be a libopus bug: silence then.
        self.run(&[], false)
            .unwrap_or_else(|_| vec![0; self.last_frame])
    }

    /// Recovers the packet lost just before `next` from the forward error correction `next`
    /// carries (Chromium sends in-band FEC); concealment when `next` has none.
    pub fn recover(&mut self, next: &[u8]) -> Vec<i16> {
        if next.is_empty() {
            return self.conceal();
        }
        self.run(next, true).unwrap_or_else(|_| self.conceal())
    }

    /// Forgets the stream (a new talk spurt after a long gap, or a new sender).
    pub fn reset(&mut self) {
        if let Ok(fresh) = OpusDecoder::new() {
            *self = fresh;
        }
    }

    fn run(&mut self, packet: &[u8], fec: bool) -> Result<Vec<i16>, OpusDecodeError> {
        let mut pcm = vec![0i16; MAX_FRAME_SAMPLES];
        // Concealment and FEC fill exactly one frame of the last size; a packet up to 120 ms.
        let frame = if packet.is_empty() || fec {
            self.last_frame
        } else {
            MAX_FRAME_SAMPLES
        };
        let data = if packet.is_empty() {
            std::ptr::null()
        } else {
            packet.as_ptr()
        };
        let len = i32::try_from(packet.len())
            .map_err(|_| OpusDecodeError::Corrupt("packet too large".into()))?;
        // SAFETY: `state` is our live decoder; `data` points at `len` readable bytes (or is null
        // with len 0 for concealment); `pcm` has room for `frame` <= MAX_FRAME_SAMPLES mono samples.
        let n = unsafe {
            opus_decode(
                self.state.as_ptr(),
                data,
                len,
                pcm.as_mut_ptr(),
                frame as c_int,
                c_int::from(fec),
            )
        };
        if n < 0 {
            return Err(OpusDecodeError::Corrupt(strerror(n)));
        }
        pcm.truncate(n as usize);
        if !packet.is_empty() && !fec && n > 0 {
            self.last_frame = n as usize;
        }
        Ok(pcm)
    }
}

impl Drop for OpusDecoder {
    fn drop(&mut self) {
        // SAFETY: `state` came from opus_decoder_create and is destroyed exactly once, here.
        unsafe { opus_decoder_destroy(self.state.as_ptr()) };
    }
}

fn strerror(code: c_int) -> String {
    // SAFETY: opus_strerror returns a pointer to a static, NUL-terminated string for any code.
    unsafe { CStr::from_ptr(opus_strerror(code)) }
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C)]
    struct RawEncoder {
        _private: [u8; 0],
    }

    #[link(name = "opus")]
    extern "C" {
        fn opus_encoder_create(
            fs: i32,
            channels: c_int,
            application: c_int,
            error: *mut c_int,
        ) -> *mut RawEncoder;
        fn opus_encode(
            st: *mut RawEncoder,
            pcm: *const i16,
            frame_size: c_int,
            data: *mut c_uchar,
            max: i32,
        ) -> i32;
        fn opus_encoder_destroy(st: *mut RawEncoder);
    }
    const OPUS_APPLICATION_VOIP: c_int = 2048;

    /// 20 ms Opus packets of a 48 kHz mono tone, as a browser sends them.
    fn tone_packets(freq_hz: f64, seconds: f64) -> Vec<Vec<u8>> {
        let mut error = 0;
        // SAFETY: test-only encoder with valid arguments; destroyed below.
        let enc = unsafe { opus_encoder_create(48_000, 1, OPUS_APPLICATION_VOIP, &mut error) };
        assert_eq!(error, OPUS_OK);
        let frame = 960;
        let frames = (seconds * 50.0) as usize;
        let mut packets = Vec::new();
        for f in 0..frames {
            let pcm: Vec<i16> = (0..frame)
                .map(|i| {
                    let t = (f * frame + i) as f64 / 48_000.0;
                    (8000.0 * (2.0 * std::f64::consts::PI * freq_hz * t).sin()) as i16
                })
                .collect();
            let mut out = vec![0u8; 1500];
            // SAFETY: `pcm` holds `frame` samples; `out` has room for 1500 bytes.
            let n =
                unsafe { opus_encode(enc, pcm.as_ptr(), frame as c_int, out.as_mut_ptr(), 1500) };
            assert!(n > 0);
            out.truncate(n as usize);
            packets.push(out);
        }
        // SAFETY: created above, destroyed once.
        unsafe { opus_encoder_destroy(enc) };
        packets
    }

    #[test]
    fn a_48k_tone_decodes_to_24k_mono_of_the_same_pitch_and_level() {
        let mut dec = OpusDecoder::new().unwrap();
        let mut pcm = Vec::new();
        for p in tone_packets(440.0, 1.0) {
            let frame = dec.decode(&p).unwrap();
            assert_eq!(frame.len(), 480, "20 ms at 24 kHz");
            pcm.extend(frame);
        }
        let tail = &pcm[2400..]; // past the codec's start-up
        let crossings = tail.windows(2).filter(|w| (w[0] < 0) != (w[1] < 0)).count();
        let hz = crossings as f64 / 2.0 / (tail.len() as f64 / 24_000.0);
        assert!((hz - 440.0).abs() < 15.0, "{hz} Hz");
        let rms =
            (tail.iter().map(|&s| (s as f64).powi(2)).sum::<f64>() / tail.len() as f64).sqrt();
        assert!(rms > 3000.0 && rms < 8000.0, "rms {rms}");
    }

    #[test]
    fn a_lost_packet_is_concealed_or_recovered_with_one_frame_of_audio() {
        let packets = tone_packets(300.0, 0.2);
        let mut dec = OpusDecoder::new().unwrap();
        for p in &packets[..5] {
            dec.decode(p).unwrap();
        }
        assert_eq!(dec.conceal().len(), 480);
        assert_eq!(dec.recover(&packets[7]).len(), 480);
        assert_eq!(dec.decode(&packets[7]).unwrap().len(), 480);
    }

    #[test]
    fn garbage_is_an_error_never_a_panic() {
        let mut dec = OpusDecoder::new().unwrap();
        assert_eq!(dec.decode(&[]), Err(OpusDecodeError::Empty));
        let mut seed = 7u32;
        for len in 1..400 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    (seed >> 24) as u8
                })
                .collect();
            // Random bytes are often valid Opus (its framing is dense); what matters is no panic
            // and, when decoded, no more than one frame.
            if let Ok(pcm) = dec.decode(&bytes) {
                assert!(pcm.len() <= MAX_FRAME_SAMPLES);
            }
        }
        // A TOC byte that announces more frames than the packet holds.
        assert!(matches!(
            dec.decode(&[0xff, 0xff]),
            Err(OpusDecodeError::Corrupt(_))
        ));
    }
}
