// Signing in with an API key (arroyo.api.auth), when the API asks for one: the key goes in the
// `arroyo_key` cookie (SameSite=Strict), which every call sends, the output's
// event streams included (an EventSource cannot send a header). The page then loads again.

import { $, API, ApiError, UNAUTHORIZED, hide, showError, showText } from "./util.js";

const COOKIE = "arroyo_key";

function setKey(value, maxAge) {
  const secure = location.protocol === "https:" ? "; Secure" : "";
  document.cookie = `${COOKIE}=${encodeURIComponent(value)}; Path=/; SameSite=Strict`
    + `; Max-Age=${maxAge}${secure}`;
}

const hasKey = () => document.cookie.split("; ").some((c) => c.startsWith(`${COOKIE}=`));

/** Shows the sign-in whenever a call is refused for want of a key. */
export function watchSignIn() {
  const card = $("signin");
  const form = $("signin-form");
  const signout = $("signout");
  signout.hidden = !hasKey();
  signout.addEventListener("click", () => {
    setKey("", 0);
    location.reload();
  });
  window.addEventListener(UNAUTHORIZED, (event) => {
    showText($("signin-why"), hasKey()
      ? `The key this browser holds was refused: ${event.detail}`
      : "This Arroyo requires an API key.");
    card.hidden = false;
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const key = form.elements.namedItem("key").value.trim();
    hide($("signin-alert"));
    if (!key) {
      showError($("signin-alert"), "Could not sign in", new ApiError(0, "enter a key", null));
      return;
    }
    const button = form.querySelector("button");
    button.disabled = true;
    setKey(key, 30 * 24 * 3600);
    try {
      // Asked directly, so that a refusal is said here rather than sent round as an event; of
      // a guarded call (the probes, /ping and /status, answer without a key).
      const response = await fetch(`${API}/pipelines?limit=1`, {
        headers: { Accept: "application/json" },
      });
      if (response.ok) {
        location.reload();
        return;
      }
      const body = await response.json().catch(() => ({}));
      const message = `${body.error || response.statusText} (HTTP ${response.status})`;
      setKey("", 0);
      showError($("signin-alert"), "Could not sign in", new ApiError(response.status, message, body));
    } catch (err) {
      setKey("", 0);
      const message = `cannot reach the API (${err.message})`;
      showError($("signin-alert"), "Could not sign in", new ApiError(0, message, null));
    } finally {
      button.disabled = false;
    }
  });
}
