// The page's state surface: one object every room reads and writes, so what the page holds is
// listed once, here, with what each field means. It holds no DOM and no rule of Rust's: the
// settings are the engine's, the view on screen is `good`, and the rest says what is waiting,
// what is on screen and what is out of date.

export const app = {
  client: null, // the engine connection (client.js)
  settings: null, // the settings the controls show, sent with the next update
  good: null, // the settings of the view on screen
  editing: null, // a number input being typed in, not yet committed (controls.js)
  restored: false, // the view opened is the one kept in this browser (no query in the address)
  note: null, // the i18n key of the page's own note in #url-warnings (showNote)
  figures: null, // the engine's figures of the view on screen
  lang: 'en',
  dark: false, // the colour scheme the charts are drawn in (main.js follows the browser's)
  pending: new Map(), // key -> control element that changed it, not yet sent
  commit: false, // a committed change (a change event) is among those pending: pushes history
  frame: 0, // the animation frame (or -1, a microtask) that sends what is pending
  ready: false, // the first view is on screen
  presented: false, // the controls are wired (present())
  listed: false, // the model presets are listed (present())
  ahead: null, // the default view drawn ahead (showAhead), until the engine's charts replace it
  early: new Map(), // key -> value a control was set to before the controls were wired (keepEarlyInput)
  stopKeepingEarly: null, // removes keepEarlyInput's listeners (applyEarlyInput)
  canvases: {}, // chart name -> its canvas element (replaced after Stop)
  upload: null, // {choice, about, files} of the uploaded data in use (replayed after Stop); about: its fields, worded in the page's language; files: [{name, bytes}] it was chosen from
  linkOnUpload: false, // the page was opened on a link made on uploaded data (`data=upload`)
  assignment: null, // the roles the engine proposed for the files listed (kvlab::upload::Assignment) and `manual`, the roles chosen by hand since
  uploadNotes: null, // the upload's warnings as fields while #upload-warnings shows them (worded again on a language switch)
  urlNotes: null, // the link's repairs ({key, message, repair}) while #url-warnings shows them (likewise)
  shownErrors: new Map(), // error slot -> the engine error it shows (likewise)
  clamped: null, // a count typed above its bound (update.js), to say once the view follows
  inFlight: false, // an update request is with the engine
  requests: 0, // requests of any kind not yet answered
  progressTimer: 0,
  query: '', // the canonical query of `good`
  labels: null, // the charts' texts in the page's language (i18n.js chartLabels)
  inputAt: null, // performance.now() of the first input event not yet painted
  // Section 5, the model (sections/model-run.js):
  model: null, // the engine's first measure of the model for the view on screen ({quality} or {error})
  modelDetails: null, // section 5's details, asked for once the controls rest
  modelDetailsFor: null, // the `model` the details were measured for (stale when it differs)
  detailsWritten: null, // {d, key}: the details last written, and for which language, policy and heads' budget
  detailsTimer: 0, // the next detail's or sweep point's request, waiting for the controls to rest
  modelVisible: true, // section 5 on screen (its IntersectionObserver says)
  modelStale: false, // an update left the model's quality for the catch-up
  sweepFor: null, // the model whose trade-off sweep waits for section 3b to come on screen
  modelBusy: false, // section 5's figures are being measured again (its details not all in)
  needle: null, // the learner's fact ({case, answers}: sections/model-needle.js), once asked
  needleAsk: null, // the fact asked last ({key, value, distance, before})
  needleSeq: 0, // counts the facts asked: a reply to an older one is dropped
  needleDraws: 0, // facts drawn ("New fact"): the next one's seed
  needleStrip: null, // the answer whose kept bytes the strip shows (null: the method's)
  needleSummary: null, // the accuracy chart's curves so far ({cases, curves})
  needleFor: null, // the `model` whose settings the answers shown were given for (stale when it differs)
  accuracyFor: null, // the model whose accuracy chart waits for section 5 to come on screen
  accuracyTimer: 0, // the accuracy chart's next request, waiting for the controls to rest
  urlTimer: 0, // see url.js scheduleUrl
  urlSeq: 0, // counts updates: a URL recording scheduled before the last one is dropped
  urlCommit: false, // the URL waiting to be recorded is pushed (a committed change is among its updates)
  sent: null, // the settings of the update with the engine
  lateCommit: false, // a commit (change event) for a value already with the engine
  // Work for what is off screen waits until the controls rest (see schedule.js catchUp):
  visible: new Set(), // charts whose canvas is on screen
  compareVisible: false, // the comparison's section is on screen
  leversVisible: false, // the levers' section ("both levers together") is on screen
  stale: new Set(), // charts drawn for earlier settings (off screen when those changed)
  // the engine deferred the comparison or the bits lever's RMSE (their sections were off screen)
  enginePending: false,
  catchUp: 0, // the scheduled catch-up (animation frame or timer), 0 when none
  stage: null, // the stage the engine reported last (shown once the progress box is up)
  timed: 0, // updates whose measures are on the performance timeline (see perf.js trimTimeline)
};
