//! What a session hands out: `MediaEvent`s delivered to one `EventSink`, from the render thread
//! (I420, Pcm, speech events), from GStreamer streaming threads (encoded outputs, bus errors) and
//! from the caller's thread (Interrupted, Closed).
//!
//! The sink contract: it is called from several threads, possibly at once; it must not block
//! (queue the event and return) and must not call back into the session's blocking calls
//! (`close`, `advance`). A panicking sink loses that one event: it is caught and counted, never
//! unwound into GStreamer. After `Closed` no further event is delivered (stragglers are counted as
//! dropped).
//!
//! Error codes carried by `MediaEvent::Error`:
//! - `PIPELINE_ERROR`: a GStreamer element posted an error on its bus (element path, message and
//!   debug string attached). The session stops producing frames; close it.
//! - `OUTPUT_INVALID`: an encoded buffer could not be turned into an event (no timestamp,
//!   unmappable). Posted to the bus as well, so it is followed by `PIPELINE_ERROR`.
//! - `RENDER_PANIC`: the render thread panicked (a bug); the session stops producing.
//! - `DRAIN_TIMEOUT`: at close, a pipeline did not deliver its end of stream in time; outputs
//!   after that point may be missing.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// One event out of a media session. Times are session time in nanoseconds: frame `i` of the
/// session is at `frame_pts_ns(i, fps, 1)`, and audio sample `n` (24 kHz) at `n * 1e9 / 24000`.
#[derive(Clone, Debug, PartialEq)]
pub enum MediaEvent {
    /// One H.264 access unit, Annex-B byte stream; keyframes carry SPS and PPS in front.
    H264 {
        data: Vec<u8>,
        pts_ns: u64,
        keyframe: bool,
    },
    /// One RTP packet from `rtpvp8pay` (RTP header included). `keyframe` is set on every packet
    /// of a key frame; `marker` on the last packet of a frame.
    Vp8Rtp {
        data: Vec<u8>,
        pts_ns: u64,
        keyframe: bool,
        marker: bool,
    },
    /// One JPEG frame; `frame_index` is the session frame number.
    Jpeg {
        data: Vec<u8>,
        pts_ns: u64,
        frame_index: u64,
    },
    /// One rendered frame, raw: the I420 planes the video encoders get (BT.601, limited range),
    /// packed: Y (`width * height` bytes), then U and V (`width / 2 * height / 2` bytes each), rows
    /// without padding. Same `pts_ns` and `frame_index` as the `Jpeg` event of that frame.
    I420 {
        data: Vec<u8>,
        pts_ns: u64,
        frame_index: u64,
        width: u32,
        height: u32,
    },
    /// One raw Opus packet (20 ms, 48 kHz clock), not RTP-packetized.
    Opus {
        data: Vec<u8>,
        pts_ns: u64,
        duration_ns: u64,
    },
    /// The audio of one frame tick: s16le mono 24 kHz, same PTS as the video frame of that tick.
    Pcm { data: Vec<u8>, pts_ns: u64 },
    /// The face of one frame tick (`Outputs::motion`), emitted before that tick's audio: what a
    /// client-side renderer draws at `pts_ns`.
    Motion {
        pts_ns: u64,
        frame_index: u64,
        face: crate::frames::FaceParams,
    },
    /// Queued speech starts playing at `pts_ns`.
    SpeechStarted { pts_ns: u64 },
    /// Queued speech finished (or was interrupted) at `pts_ns`.
    SpeechEnded { pts_ns: u64 },
    /// Speech was cut at `pts_ns`: `played_ns` of the current utterance had been played,
    /// `dropped_ns` of queued speech was discarded.
    Interrupted {
        pts_ns: u64,
        played_ns: u64,
        dropped_ns: u64,
    },
    /// Something went wrong while running; see the module doc for the codes.
    Error {
        code: String,
        message: String,
        element: Option<String>,
        debug: Option<String>,
    },
    /// The session is closed; always the last event.
    Closed,
}

/// Where a session delivers its events. Must be non-blocking; see the module doc.
pub type EventSink = Arc<dyn Fn(MediaEvent) + Send + Sync>;

thread_local! {
    /// Set while this thread is inside the sink, so `close()` called from the sink can refuse
    /// instead of deadlocking on the pipeline threads it would have to stop.
    static IN_SINK: Cell<bool> = const { Cell::new(false) };
}

/// True when the current thread is running the event sink.
pub(crate) fn in_sink() -> bool {
    IN_SINK.with(|f| f.get())
}

/// Delivers events to the sink, counts them, and enforces "nothing after Closed".
pub(crate) struct Emitter {
    sink: EventSink,
    emitted: AtomicU64,
    dropped: AtomicU64,
    closed: AtomicBool,
}

impl Emitter {
    pub(crate) fn new(sink: EventSink) -> Arc<Emitter> {
        Arc::new(Emitter {
            sink,
            emitted: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            closed: AtomicBool::new(false),
        })
    }

    pub(crate) fn emit(&self, event: MediaEvent) {
        if self.closed.load(Ordering::Acquire) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.deliver(event);
    }

    /// Emits `Closed` once; later events are dropped and counted.
    pub(crate) fn emit_closed(&self) {
        if !self.closed.swap(true, Ordering::AcqRel) {
            self.deliver(MediaEvent::Closed);
        }
    }

    fn deliver(&self, event: MediaEvent) {
        let was_in_sink = IN_SINK.with(|f| f.replace(true));
        let result = catch_unwind(AssertUnwindSafe(|| (self.sink)(event)));
        IN_SINK.with(|f| f.set(was_in_sink));
        match result {
            Ok(()) => self.emitted.fetch_add(1, Ordering::Relaxed),
            // The sink panicked: that event is lost; count it rather than unwind into C.
            Err(_) => self.dropped.fetch_add(1, Ordering::Relaxed),
        };
    }

    pub(crate) fn emitted(&self) -> u64 {
        self.emitted.load(Ordering::Relaxed)
    }

    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// Parses an RTP packet carrying VP8 (RFC 7741). Returns `(marker, starts_key_frame)` where
/// `starts_key_frame` is `Some(true|false)` on the first packet of a frame (S bit set, partition
/// 0) and `None` on continuation packets. `None` overall when the packet is malformed.
pub(crate) fn parse_vp8_rtp(packet: &[u8]) -> Option<(bool, Option<bool>)> {
    if packet.len() < 12 || packet[0] >> 6 != 2 {
        return None;
    }
    let marker = packet[1] & 0x80 != 0;
    let csrc_count = (packet[0] & 0x0f) as usize;
    let mut off = 12 + 4 * csrc_count;
    if packet[0] & 0x10 != 0 {
        // Header extension: 4-byte header, length in 32-bit words.
        let ext = packet.get(off + 2..off + 4)?;
        off += 4 + 4 * u16::from_be_bytes([ext[0], ext[1]]) as usize;
    }
    let mut payload = packet.get(off..)?;
    if packet[0] & 0x20 != 0 {
        // Padding: last byte says how many bytes to drop.
        let pad = *payload.last()? as usize;
        payload = payload.get(..payload.len().checked_sub(pad)?)?;
    }
    // VP8 payload descriptor.
    let b0 = *payload.first()?;
    let start = b0 & 0x10 != 0;
    let partition = b0 & 0x07;
    let mut i = 1;
    if b0 & 0x80 != 0 {
        let x = *payload.get(i)?;
        i += 1;
        if x & 0x80 != 0 {
            // PictureID: 7 or 15 bits.
            let m = *payload.get(i)?;
            i += if m & 0x80 != 0 { 2 } else { 1 };
        }
        if x & 0x40 != 0 {
            i += 1; // TL0PICIDX
        }
        if x & 0x30 != 0 {
            i += 1; // TID/Y/KEYIDX
        }
    }
    if !(start && partition == 0) {
        return Some((marker, None));
    }
    // VP8 payload header: bit 0 of the first byte is the inverse key frame flag.
    let header = *payload.get(i)?;
    Some((marker, Some(header & 0x01 == 0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vp8_descriptor_parsing() {
        // RTP v2, marker, PT 96; descriptor X=1,S=1,PID=0; I=1 with 15-bit picture id; key frame.
        let mut pkt = vec![0x80, 0xe0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1];
        pkt.extend_from_slice(&[0x90, 0x80, 0x80, 0x01, 0x10, 0x02, 0x00]);
        assert_eq!(parse_vp8_rtp(&pkt), Some((true, Some(true))));
        // Same with the inverse key frame bit set: delta frame.
        let last = pkt.len() - 3;
        pkt[last] = 0x11;
        assert_eq!(parse_vp8_rtp(&pkt), Some((true, Some(false))));
        // Continuation packet (S=0), no marker.
        let cont = vec![
            0x80, 0x60, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1, 0x80, 0x80, 0x80, 0x01, 0xaa,
        ];
        assert_eq!(parse_vp8_rtp(&cont), Some((false, None)));
        assert_eq!(parse_vp8_rtp(&[0x80, 0x60]), None);
    }

    #[test]
    fn emitter_counts_and_stops_after_closed() {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let s = seen.clone();
        let e = Emitter::new(Arc::new(move |ev| {
            if matches!(ev, MediaEvent::SpeechStarted { pts_ns: 13 }) {
                panic!("sink bug");
            }
            s.lock().unwrap().push(ev)
        }));
        e.emit(MediaEvent::SpeechStarted { pts_ns: 1 });
        e.emit(MediaEvent::SpeechStarted { pts_ns: 13 });
        e.emit_closed();
        e.emit_closed();
        e.emit(MediaEvent::SpeechEnded { pts_ns: 2 });
        assert_eq!(
            *seen.lock().unwrap(),
            vec![MediaEvent::SpeechStarted { pts_ns: 1 }, MediaEvent::Closed]
        );
        assert_eq!(e.emitted(), 2);
        assert_eq!(e.dropped(), 2);
        assert!(!in_sink());
    }
}
