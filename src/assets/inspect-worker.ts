/** Worker thread entry (core/off-thread.ts): the upload checks of inspect.ts, off the event loop. */
import { serveJobs } from '../core/off-thread.js';
import { inspectMotion, inspectVoice, readMotion } from './inspect.js';

serveJobs({ voice: inspectVoice, motion: inspectMotion, template: readMotion });
