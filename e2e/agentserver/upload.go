package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
)

// Reading an upload's body as Starlette reads a form before FastAPI calls
// the route: multipart/form-data (or a urlencoded form, which can hold no
// file), other bodies giving an empty form. A part with a filename
// parameter is a file, spooled like Starlette's UploadFile (in memory up
// to 1 MiB, then in a temporary file), so a body of any size streams
// through without being held in memory. When "file" comes more than once
// the last one counts, as FastAPI reads a single value.

const (
	spoolMemory  = 1 << 20 // Starlette's UploadFile spool size
	maxFormParts = 1000    // Starlette's max_files and max_fields
	maxFieldSize = 1 << 20 // Starlette's max_part_size for a non-file field
)

type uploadForm struct {
	file *spool   // the last "file" part with a filename
	text *string  // the last "file" part without one
	all  []*spool // every spooled file part, for close
}

func (f *uploadForm) close() {
	for _, s := range f.all {
		s.close()
	}
}

func readForm(r *http.Request) (*uploadForm, error) {
	form := &uploadForm{}
	ctype, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch {
	case err != nil:
		return form, nil
	case ctype == "application/x-www-form-urlencoded":
		b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBody))
		if err != nil {
			return form, err
		}
		vals, err := url.ParseQuery(string(b))
		if err != nil {
			return form, err
		}
		if vs := vals["file"]; len(vs) > 0 {
			form.text = &vs[len(vs)-1]
		}
		return form, nil
	case ctype != "multipart/form-data":
		return form, nil
	case params["boundary"] == "":
		return form, errors.New("missing boundary in multipart")
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	files, fields := 0, 0
	for {
		part, err := mr.NextRawPart()
		if err == io.EOF {
			return form, nil
		}
		if err != nil {
			form.close()
			return form, err
		}
		_, dparams, err := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
		if err != nil {
			form.close()
			return form, fmt.Errorf("part without a valid Content-Disposition: %w", err)
		}
		name := dparams["name"]
		if _, isFile := dparams["filename"]; isFile {
			if files++; files > maxFormParts {
				form.close()
				return form, errors.New("too many files")
			}
			s := &spool{}
			form.all = append(form.all, s)
			if _, err := io.Copy(s, part); err != nil {
				form.close()
				return form, err
			}
			if name == "file" {
				form.file, form.text = s, nil
			}
			continue
		}
		if fields++; fields > maxFormParts {
			form.close()
			return form, errors.New("too many fields")
		}
		b, err := io.ReadAll(io.LimitReader(part, maxFieldSize+1))
		if err != nil {
			form.close()
			return form, err
		}
		if len(b) > maxFieldSize {
			form.close()
			return form, errors.New("field too large")
		}
		if name == "file" {
			v := decodeReplace(b)
			form.file, form.text = nil, &v
		}
	}
}

// spool holds a file part: bytes in memory, then, past spoolMemory, in a
// temporary file.
type spool struct {
	mem  bytes.Buffer
	file *os.File
}

func (s *spool) Write(p []byte) (int, error) {
	if s.file == nil && s.mem.Len()+len(p) <= spoolMemory {
		return s.mem.Write(p)
	}
	if s.file == nil {
		dir, err := pyTempDir()
		if err != nil {
			return 0, err
		}
		if s.file, err = os.CreateTemp(dir, "tmp"); err != nil {
			return 0, err
		}
		if _, err := s.file.Write(s.mem.Bytes()); err != nil {
			return 0, err
		}
		s.mem = bytes.Buffer{}
	}
	return s.file.Write(p)
}

func (s *spool) copyTo(w io.Writer) (int64, error) {
	if s.file == nil {
		return io.Copy(w, bytes.NewReader(s.mem.Bytes()))
	}
	if _, err := s.file.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	return io.Copy(w, s.file)
}

func (s *spool) close() {
	if s.file != nil {
		s.file.Close()
		os.Remove(s.file.Name())
	}
}
