// Arroyo's web UI: ES modules over the REST API (/api/v1), no build step; its libraries are
// bundled into vendor/ by scripts/vendor-web (committed).
// Pages, one module each, at real paths (the api serves index.html for any path that is not
// a file, so a link to one works from anywhere): / lists the pipelines and creates one
// (pipelines.js); /pipelines/<id> shows one (pipeline.js); /udfs the saved UDFs (udfs.js);
// /connections the saved connection profiles and tables, with a wizard (connections.js).
// Every failed API call is shown in the nearest role="alert" element, never dropped.

import { connectionsView } from "./connections.js";
import { detailView } from "./pipeline.js";
import { pipelinesPage } from "./pipelines.js";
import { watchSignIn } from "./signin.js";
import { udfsPage } from "./udfs.js";
import { $, POLL_MS, api, h, hide, showText } from "./util.js";

// ---- the cluster's readiness: a banner while GET /status says it is not ready

// Once ready, the status is still looked at now and then, to say so if a service goes away.
const READY_POLL_MS = 15000;

async function watchReadiness() {
  const banner = $("cluster-banner");
  let ready = false;
  try {
    const status = await api("GET", "/status");
    ready = status.ready;
    const waiting = Object.entries(status.services).filter(([, svc]) => svc.state !== "ready");
    const why = waiting
      .map(([name, svc]) => `${name} ${svc.state}${svc.detail ? ` (${svc.detail})` : ""}`)
      .join("; ");
    if (ready) hide(banner);
    else if (waiting.some(([, svc]) => svc.state === "unavailable")) {
      showText(banner, `Not ready: ${why}.`);
    } else {
      showText(banner, `Arroyo is starting: ${why}. A pipeline created now waits for it.`);
    }
  } catch (err) {
    showText(banner, `Not ready: ${err.message}.`);
  }
  banner.dataset.ready = String(ready);
  setTimeout(watchReadiness, ready ? READY_POLL_MS : POLL_MS);
}

// ---- routing: the History API; a link within the UI changes the page without a reload

function router() {
  let view = null; // the page shown: { stop() }
  let flash = null; // a message for the next page (a deleted pipeline's)
  const navigate = (path, message = null) => {
    flash = message;
    if (location.pathname !== path) history.pushState(null, "", path);
    route();
  };
  const pipelines = pipelinesPage({ navigate });
  const udfs = udfsPage();

  function route() {
    if (view) view.stop();
    view = null;
    hide($("route-alert"));
    if (flash) showText($("flash"), flash);
    else hide($("flash"));
    flash = null;
    // Links of the hash-routed UI (#/pipelines/<id>) still lead where they did.
    if (location.hash.startsWith("#/")) {
      history.replaceState(null, "", location.hash.slice(1));
    }
    const path = location.pathname.replace(/\/+$/, "") || "/";
    const match = path.match(/^\/pipelines\/([^/]+)$/);
    if (path === "/" || path === "/pipelines") view = pipelines.show();
    else if (path === "/udfs") view = udfs.show();
    else if (path === "/connections") view = connectionsView();
    else if (match) view = detailView(decodeURIComponent(match[1]), { navigate });
    else {
      showText($("route-alert"), `There is no page ${path}: see `,
        h("a", { href: "/" }, "the pipelines"), ".");
    }
  }

  // A plain click on a link to a page of the UI: the page changes in place.
  document.addEventListener("click", (event) => {
    const link = event.target.closest("a[href]");
    if (!link || event.defaultPrevented || event.button !== 0) return;
    if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    if (link.target || link.hasAttribute("download")) return;
    const url = new URL(link.href, location.href);
    if (url.origin !== location.origin || url.pathname.startsWith("/api/")) return;
    event.preventDefault();
    navigate(url.pathname);
  });
  window.addEventListener("popstate", route);
  route();
}

watchSignIn();
router();
watchReadiness();
