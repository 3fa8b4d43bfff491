// The episode page's step keys (Streamlit has none), as step_list.keys() sends them: a function of the
// keys -> navigation buttons map, which the page calls once per script run.
(targets) => {
  // Registered once per page; buttons are looked up when a key is handled, so reruns do not matter.
  if (window.__aresViewerKeys) return;
  window.__aresViewerKeys = true;
  const queue = [];
  let draining = false;
  const sleep = (ms) => new Promise((done) => setTimeout(done, ms));
  const running = () => document.querySelector('[data-testid="stStatusWidget"]');
  // One key at a time: press its button, then wait until the URL names the new step (the press was
  // handled) before the next, so presses made while the app draws are queued, not merged or lost.
  // (A press at the first or last step, whose button is disabled, does nothing.)
  const button = (key) => document.querySelector(`.st-key-${key} button`);
  // The step the page has finished drawing (the marker comes last in the step panes) and the URL's step.
  const drawn = () => document.querySelector("[data-ares-step]")?.getAttribute("data-ares-step");
  const named = () => new URLSearchParams(window.location.search).get("step");
  // The step the slider shows: a press sends the slider's value with it, and until the slider has drawn the new
  // step that value is the step before (the server lets the press win, but waiting keeps the two agreed).
  const slid = () => document.querySelector('.st-key-episode-slider input[type="range"]')?.value;
  const behind = () => named() !== null && (drawn() !== named() || (slid() !== undefined && slid() !== named()));
  async function settle() {
    for (let i = 0; i < 400 && (running() || behind()); i++) await sleep(25);
  }
  // On a page just opened, the step panes' marker can be drawn before Streamlit has drawn its buttons (their
  // containers are there, empty): a key pressed then waits for its button (up to 5 s) instead of being lost.
  async function drawnButton(key) {
    for (let i = 0; i < 200 && !button(key); i++) await sleep(25);
    return button(key);
  }
  async function press(key) {
    for (let attempt = 0; attempt < 3; attempt++) {
      await settle();
      const target = await drawnButton(key);
      if (!target || target.disabled) return;
      const before = window.location.search;
      target.click();
      for (let i = 0; i < 200 && window.location.search === before; i++) await sleep(25);
      if (window.location.search !== before) return;
    }
  }
  async function drain() {
    if (draining) return;
    draining = true;
    try {
      while (queue.length) await press(queue.shift());
    } finally {
      draining = false;
    }
  }
  document.addEventListener("keydown", (event) => {
    const t = event.target;
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (t && (t.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(t.tagName)
              || t.getAttribute("role") === "slider")) return;
    const key = targets[event.key];
    // Only on the Episode page's step view: its button is there, or its step panes are (buttons still coming).
    if (!key || !(button(key) || drawn() !== undefined)) return;
    event.preventDefault();
    queue.push(key);
    drain();
  });
}
