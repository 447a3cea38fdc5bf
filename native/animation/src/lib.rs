//! What the face does when: the mouth from phoneme timings (`viseme`, `track`) or from the audio
//! itself (`audio`), the head and eyes from a looping driving motion (`motion`) plus procedural
//! blinks (`blink`), a listening layer while the user speaks (`listening`), the speaking face
//! (`expression`: brows, cheeks, nods and blinks from the voice's stress, phrasing and melody,
//! `prosody`), and exact frame and sample timestamps (`timeline`). `Animator` puts them
//! together: the media session pushes speech into it and asks it, once per video frame, for the
//! `FaceState` at that frame's pts.
//!
//! Invariants: time is the session's running time in integer nanoseconds (`*_ns: u64`), shared
//! by audio and video; everything is deterministic (no clocks, no randomness beyond explicit
//! seeds), so the same inputs and query times give the same faces.
//!
//! It does not render (that is `face-render`), decode or resample audio, own a clock, or talk to
//! TTS engines: phoneme timings and PCM arrive already on the session timeline.

pub mod animator;
pub mod audio;
pub mod blink;
pub mod expression;
pub mod listening;
pub mod motion;
pub mod prosody;
mod spectrum;
pub mod timeline;
pub mod track;
pub mod viseme;

pub use animator::Animator;
pub use audio::AudioLips;
pub use blink::Blinker;
pub use listening::Listening;
pub use face_render::{FaceState, MouthShape, Pose};
pub use motion::{DrivingMotion, MotionError, MotionFrame};
pub use timeline::{frame_duration_ns, frame_index_at, frame_pts_ns, ns_to_samples, samples_in_frame, samples_to_ns};
pub use track::{VisemeEvent, VisemeTrack};
pub use viseme::{phrase_mark_of, stress_of, target_shape, viseme_for_phoneme, PhraseMark, Viseme};
