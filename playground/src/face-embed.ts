/**
 * The face renderer for a page of your own, served by the server as `/playground/face.js` (an ES
 * module with no dependencies). With a call made with `session.video_render: "client"`:
 *
 *   import { drawFaceOnCall } from 'https://your-server/playground/face.js';
 *   drawFaceOnCall(pc, dataChannel, document.querySelector('canvas'));
 *
 * Lower down, FaceView takes the output_motion events from any transport with a clock of your
 * own (when each frame's sound is heard), and createFaceRenderer draws single frames.
 */
export { canDrawFaces, decodeFace, drawFaceOnCall, FaceView, framesOf, RtpPlayoutClock, type DueClock } from './face-view.js';
export { createFaceRenderer, type ClientFace, type FaceFrame, type FaceRenderer } from './face/renderer.js';
