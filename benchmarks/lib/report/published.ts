/**
 * Published latency figures of other realtime avatar products, for the report's "beside
 * published figures" plot. Taken from the research notes (../shared/reference/anchors.md), which
 * were read from public copies of docs and pages: nothing here was measured by us.
 *
 * Invariants: every figure says what it measures (they are not the same measure as each other,
 * nor always as ours), who states it (`claim`: the vendor or authors, a third party, or a figure
 * whose primary source could not be traced), and where it comes from (`sources`, the addresses
 * the notes give). `ms` is the stated figure ("< 200 ms" is drawn as 200, "~600 ms" as 600);
 * `upperMs` the upper end of a stated range or bound, where there is one.
 */

export type Claim = 'vendor claim' | 'authors’ claim' | '3rd-party' | 'unverified';

export interface PublishedFigure {
  product: string;
  /** The figure as stated, for the label ("~600 ms", "< 200 ms"). */
  stated: string;
  ms: number;
  upperMs?: number;
  /** What the figure measures, in the source's terms. */
  measures: string;
  claim: Claim;
  sources: Array<{ label: string; url: string }>;
  /** Anything a reader should know before comparing. */
  caveat?: string;
}

export const PUBLISHED_FIGURES: PublishedFigure[] = [
  {
    product: 'Tavus CVI',
    stated: '~600 ms (SLA < 1 s)',
    ms: 600,
    upperMs: 1000,
    measures: 'response time, utterance to utterance (the user stops → the replica answers)',
    claim: 'vendor claim',
    sources: [{ label: 'Tavus CVI overview', url: 'https://docs.tavus.io/sections/conversational-video-interface/overview-cvi' }],
  },
  {
    product: 'Anam',
    stated: '~70 ms',
    ms: 70,
    measures: 'time to first frame of the avatar (avatar stage only)',
    claim: 'unverified',
    sources: [{ label: 'Anam launch thread (Hacker News mirror)', url: 'https://nuxt-hackernews-clone-xvvhang.vercel.app/item/47048040' }],
    caveat: 'said in a launch thread; no primary measurement found. Session set-up is 1–2 s (up to 5 s) by the vendor’s FAQ.',
  },
  {
    product: 'bitHuman',
    stated: '< 200 ms',
    ms: 200,
    measures: 'end-to-end latency of the avatar SDK (on CPU)',
    claim: 'vendor claim',
    sources: [{ label: 'PyPI page of bithuman 1.10.8', url: 'https://pypi.org/project/bithuman/1.10.8/' }],
  },
  {
    product: 'HeyGen LiveAvatar',
    stated: '~400 ms',
    ms: 400,
    measures: 'time to first response (TTFR)',
    claim: '3rd-party',
    sources: [{ label: 'digidouble platform profile: HeyGen', url: 'https://digidouble.edugami.app/platform/heygen' }],
  },
  {
    product: 'D-ID Agents / Streams',
    stated: '500 ms – 2 s',
    ms: 500,
    upperMs: 2000,
    measures: 'response latency',
    claim: '3rd-party',
    sources: [{ label: 'users measured ~1 s for the API call plus 2–3 s before playback (de-id/live-streaming-demo#15)', url: 'https://github.com/de-id/live-streaming-demo/issues/15' }],
    caveat: 'the 500 ms – 2 s range is a 3rd-party figure our notes give no address for; the link is a user measurement, slower still.',
  },
  {
    product: 'Ditto (Ant Group, open source)',
    stated: 'first frame < 400 ms',
    ms: 400,
    measures: 'first-frame delay of the online mode (TensorRT on an A100)',
    claim: 'authors’ claim',
    sources: [{ label: 'ditto-talkinghead issue 14', url: 'https://github.com/antgroup/ditto-talkinghead/issues/14' }],
    caveat: 'the same thread reports 25 s to render 19 s of audio on an RTX 4060.',
  },
  {
    product: 'Decart live_avatar',
    stated: 'sub-500 ms',
    ms: 500,
    measures: 'latency of the Realtime API',
    claim: 'vendor claim',
    sources: [{ label: 'Decart platform docs (skills.sh copy)', url: 'https://www.skills.sh/site/docs.platform.decart.ai/decart' }],
  },
  {
    product: 'Beyond Presence',
    stated: '< 100 ms',
    ms: 100,
    measures: 'avatar latency',
    claim: '3rd-party',
    sources: [{ label: 'digidouble state of the art', url: 'https://digidouble.edugami.app/state-of-art' }],
  },
];
