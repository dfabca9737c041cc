// HTTP calls to companion's /v1/ API with the token as bearer. The base
// is the directory the page was served from, so the page works at "/" and
// under a base path alike.

/** ApiError is a failed call: the server's code and message, and the HTTP status. */
export class ApiError extends Error {
  constructor(status, code, message, body) {
    super(message);
    this.status = status;
    this.code = code;
    this.body = body;
  }
}

export class Api {
  /**
   * @param {URL} base the page's directory, e.g. http://127.0.0.1:4000/
   * @param {() => string} token the current token ("" when signed in by cookie)
   */
  constructor(base, token) {
    this.base = base;
    this.token = token;
  }

  /** url resolves an API path ("v1/workspaces") against the base. */
  url(path) {
    return new URL(path, this.base);
  }

  headers(extra = {}) {
    const h = { ...extra };
    const t = this.token();
    if (t) h["Authorization"] = "Bearer " + t;
    return h;
  }

  /**
   * call sends a request and returns the decoded JSON answer (null for an
   * empty one). It throws ApiError with the server's code and message.
   * @param {string} method
   * @param {string} path
   * @param {any} [body] a JSON value, or a Blob sent as it is
   */
  async call(method, path, body) {
    const init = { method, headers: this.headers(), credentials: "same-origin", cache: "no-store" };
    if (body instanceof Blob) {
      init.body = body;
      init.headers["Content-Type"] = body.type || "application/octet-stream";
    } else if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers["Content-Type"] = "application/json";
    }
    let resp;
    try {
      resp = await fetch(this.url(path), init);
    } catch (e) {
      throw new ApiError(0, "network", "companion cannot be reached: " + e.message);
    }
    const text = await resp.text();
    let data = null;
    if (text) {
      try { data = JSON.parse(text); } catch { data = null; }
    }
    if (!resp.ok) {
      const err = (data && data.error) || {};
      throw new ApiError(resp.status, err.code || "http_" + resp.status, err.message || `${method} ${path}: HTTP ${resp.status}`, data);
    }
    return data;
  }

  /**
   * exists reports whether a route is there: false when it answers 404 or
   * 405 (a part of companion this build does not have yet).
   */
  async exists(path) {
    try {
      await this.call("GET", path);
      return true;
    } catch (e) {
      return !(e instanceof ApiError && (e.status === 404 || e.status === 405 || e.status === 0));
    }
  }

  /**
   * download fetches a file with the token (a plain link cannot carry it)
   * and hands it to the browser as a download named name.
   */
  async download(path, name) {
    const resp = await fetch(this.url(path), { headers: this.headers(), credentials: "same-origin", cache: "no-store" });
    if (!resp.ok) {
      let msg = `download ${name}: HTTP ${resp.status}`;
      try { msg = (await resp.json()).error.message; } catch { /* keep the status */ }
      throw new ApiError(resp.status, "download", msg);
    }
    const blob = await resp.blob();
    const href = URL.createObjectURL(blob);
    const a = document.createElement("a");
    a.href = href;
    a.download = name;
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(href), 60_000);
  }
}
