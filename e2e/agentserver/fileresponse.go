package main

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// fileResponse answers 200 with the file at f the way Starlette's
// FileResponse does for the agent-server's downloads (download, archive,
// trajectory): the media type (text/* gets "; charset=utf-8"), Accept-Ranges,
// an attachment Content-Disposition, and Content-Length, Last-Modified and
// an ETag from the file's stat taken when the answer starts. A Range header
// is honoured as Starlette honours it: one range is a 206, several a
// multipart/byteranges 206, a start past the end a 416, a malformed one a
// 400 in plain text (a fresh answer, without extra). extra are the route's
// own headers. f is read from its start; the caller closes it.
func fileResponse(w http.ResponseWriter, r *http.Request, f *os.File, mediaType, filename string, extra http.Header) {
	fi, err := f.Stat()
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		internalError(w, err)
		return
	}
	size := fi.Size()
	mtime := float64(fi.ModTime().Unix()) + float64(fi.ModTime().Nanosecond())*1e-9
	etagSum := md5.Sum([]byte(pyFloatRepr(mtime) + "-" + strconv.FormatInt(size, 10)))
	h := http.Header{}
	for k, v := range extra {
		h[k] = v
	}
	ctype := mediaType
	if strings.HasPrefix(ctype, "text/") && !strings.Contains(strings.ToLower(ctype), "charset=") {
		ctype += "; charset=utf-8"
	}
	h.Set("Content-Type", ctype)
	h.Set("Accept-Ranges", "bytes")
	h.Set("Content-Disposition", contentDisposition(filename))
	h.Set("Content-Length", strconv.FormatInt(size, 10))
	h.Set("Last-Modified", time.Unix(fi.ModTime().Unix(), 0).UTC().Format(http.TimeFormat))
	h.Set("Etag", `"`+hex.EncodeToString(etagSum[:])+`"`)

	rangeHdr := r.Header.Get("Range")
	whole := func() {
		copyHeader(w.Header(), h)
		w.WriteHeader(http.StatusOK)
		io.Copy(w, io.LimitReader(f, size))
	}
	if ifRange := r.Header.Get("If-Range"); rangeHdr == "" || ifRange != "" && ifRange != h.Get("Last-Modified") && ifRange != h.Get("Etag") {
		whole()
		return
	}
	ranges, status, msg := parseRanges(rangeHdr, size)
	switch {
	case status == http.StatusBadRequest:
		plainText(w, http.StatusBadRequest, msg)
		return
	case status == http.StatusRequestedRangeNotSatisfiable:
		w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", size))
		plainText(w, status, "")
		return
	case len(ranges) == 0:
		whole()
		io.Copy(w, io.LimitReader(f, size))
		return
	case len(ranges) == 1:
		rg := ranges[0]
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", rg[0], rg[1]-1, size))
		h.Set("Content-Length", strconv.FormatInt(rg[1]-rg[0], 10))
		copyHeader(w.Header(), h)
		w.WriteHeader(http.StatusPartialContent)
		io.Copy(w, io.NewSectionReader(f, rg[0], rg[1]-rg[0]))
		return
	}
	boundary := randomHex(13)
	part := func(rg [2]int64) string {
		return fmt.Sprintf("--%s\r\nContent-Type: %s\r\nContent-Range: bytes %d-%d/%d\r\n\r\n", boundary, ctype, rg[0], rg[1]-1, size)
	}
	total := int64(len(boundary) + 4)
	for _, rg := range ranges {
		total += int64(len(part(rg))) + rg[1] - rg[0] + 2
	}
	h.Set("Content-Type", "multipart/byteranges; boundary="+boundary)
	h.Set("Content-Length", strconv.FormatInt(total, 10))
	copyHeader(w.Header(), h)
	w.WriteHeader(http.StatusPartialContent)
	for _, rg := range ranges {
		io.WriteString(w, part(rg))
		io.Copy(w, io.NewSectionReader(f, rg[0], rg[1]-rg[0]))
		io.WriteString(w, "\r\n")
	}
	io.WriteString(w, "--"+boundary+"--")
}

// contentDisposition is Starlette's attachment header: the plain quoted
// form when quote() leaves the name as it is, else the RFC 5987 form.
func contentDisposition(name string) string {
	if q := pyQuote(name, "/"); q != name {
		return "attachment; filename*=utf-8''" + q
	}
	return `attachment; filename="` + name + `"`
}

// parseRanges reads a Range header as Starlette does. It returns the
// ranges as [start, end) pairs (none: serve the whole file), or a status
// of 400 (with its message) or 416.
func parseRanges(header string, size int64) ([][2]int64, int, string) {
	units, spec, ok := strings.Cut(header, "=")
	if !ok {
		return nil, http.StatusBadRequest, "Malformed range header."
	}
	if strings.ToLower(strings.TrimSpace(units)) != "bytes" {
		return nil, http.StatusBadRequest, "Only support bytes range"
	}
	if strings.Count(spec, ",")+1 > 100 {
		return nil, 0, ""
	}
	var ranges [][2]int64
	for part := range strings.SplitSeq(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" || part == "-" || !strings.Contains(part, "-") {
			continue
		}
		startS, endS, _ := strings.Cut(part, "-")
		startS, endS = strings.TrimSpace(startS), strings.TrimSpace(endS)
		var start, end int64
		if startS == "" {
			n, ok := pyInt(endS)
			if !ok {
				continue
			}
			start, end = max(size-n, 0), size
		} else {
			n, ok := pyInt(startS)
			if !ok {
				continue
			}
			start, end = n, size
			if endS != "" {
				e, ok := pyInt(endS)
				if !ok {
					continue
				}
				if e < size {
					end = e + 1
				}
			}
		}
		ranges = append(ranges, [2]int64{start, end})
	}
	if len(ranges) == 0 {
		return nil, http.StatusBadRequest, "Range header: range must be requested"
	}
	for _, rg := range ranges {
		if rg[0] < 0 || rg[0] >= size {
			return nil, http.StatusRequestedRangeNotSatisfiable, ""
		}
	}
	for _, rg := range ranges {
		if rg[0] >= rg[1] {
			return nil, http.StatusBadRequest, "Range header: start must be less than end"
		}
	}
	if len(ranges) == 1 {
		return ranges, 0, ""
	}
	sort.Slice(ranges, func(i, j int) bool {
		if ranges[i][0] != ranges[j][0] {
			return ranges[i][0] < ranges[j][0]
		}
		return ranges[i][1] < ranges[j][1]
	})
	merged := [][2]int64{ranges[0]}
	for _, rg := range ranges[1:] {
		last := &merged[len(merged)-1]
		if rg[0] <= last[1] {
			last[1] = max(last[1], rg[1])
		} else {
			merged = append(merged, rg)
		}
	}
	return merged, 0, ""
}

// pyInt parses an integer as Python's int() parses a string: surrounding
// whitespace, a sign, and single underscores between digits.
func pyInt(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if s == "" || s[0] == '_' || s[len(s)-1] == '_' || strings.Contains(s, "__") {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
	if err != nil || strings.ContainsAny(s, "+-") {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// plainText is Starlette's PlainTextResponse.
func plainText(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	io.WriteString(w, body)
}

func copyHeader(dst, src http.Header) {
	for k, v := range src {
		dst[k] = v
	}
}
