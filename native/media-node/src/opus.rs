//! `OpusDecoder`: a WebRTC caller's microphone packets to mono PCM16 at 24 kHz (media-core's
//! `opus_decode`). Synchronous: a 20 ms packet decodes in tens of microseconds, less than a
//! round trip to the thread pool would cost.

use napi::bindgen_prelude::{Buffer, Int16Array};
use napi::Result;
use napi_derive::napi;

use crate::error::{guard, js_error, ErrorCode};

#[napi]
pub struct OpusDecoder {
    inner: media_core::opus_decode::OpusDecoder,
}

#[napi]
impl OpusDecoder {
    #[napi(constructor)]
    pub fn new() -> Result<Self, ErrorCode> {
        guard("new OpusDecoder()", || {
            let inner = media_core::opus_decode::OpusDecoder::new()
                .map_err(|e| js_error(ErrorCode::custom(e.code()), e.to_string()))?;
            Ok(OpusDecoder { inner })
        })
    }

    /// Decodes one Opus packet (an RTP payload) to mono PCM16 at 24 kHz. Throws OPUS_DECODE_FAILED.
    #[napi]
    pub fn decode(&mut self, packet: Buffer) -> Result<Int16Array, ErrorCode> {
        guard("OpusDecoder.decode()", || {
            self.inner
                .decode(&packet)
                .map(Int16Array::new)
                .map_err(|e| js_error(ErrorCode::custom(e.code()), e.to_string()))
        })
    }

    /// One frame of concealment for a lost packet (the length of the last frame).
    #[napi]
    pub fn conceal(&mut self) -> Result<Int16Array, ErrorCode> {
        guard("OpusDecoder.conceal()", || {
            Ok(Int16Array::new(self.inner.conceal()))
        })
    }

    /// The packet lost just before `next`, from the forward error correction `next` carries.
    #[napi]
    pub fn recover(&mut self, next: Buffer) -> Result<Int16Array, ErrorCode> {
        guard("OpusDecoder.recover()", || {
            Ok(Int16Array::new(self.inner.recover(&next)))
        })
    }

    /// Forgets the stream's state.
    #[napi]
    pub fn reset(&mut self) -> Result<(), ErrorCode> {
        guard("OpusDecoder.reset()", || {
            self.inner.reset();
            Ok(())
        })
    }
}
