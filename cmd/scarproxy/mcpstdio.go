package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxMCPLine bounds one line of `scarproxy mcp`'s input, as the SDK's
// transport bounds a frame.
const maxMCPLine = mcp.DefaultMaxLineLength

// stdioTransport is the MCP transport of `scarproxy mcp`: newline-delimited
// JSON-RPC over in and out. The SDK's IOTransport ends the session at the
// first line that is not a JSON-RPC message; here such a line is answered
// with the error JSON-RPC calls for (-32700 for a line that is not JSON or
// is longer than maxMCPLine, -32600 for JSON that is not a message) and
// skipped, and the session carries on. The transport reads in until its end
// or until the session closes its side.
func stdioTransport(in io.Reader, out io.Writer) mcp.Transport {
	pr, pw := io.Pipe()
	w := &lineWriter{w: out}
	go func() { pw.CloseWithError(forwardMessages(in, pw, w)) }()
	return &mcp.IOTransport{Reader: pr, Writer: w}
}

// lineWriter writes whole lines to w, one writer at a time: the SDK's
// messages and the errors forwardMessages answers never interleave.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Close leaves the output open: it is the process's stdout.
func (l *lineWriter) Close() error { return nil }

// JSON-RPC's answers to a line that is not a message. Its id is null: it
// could not be read.
var (
	rpcParseError     = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the line is not JSON"}}` + "\n")
	rpcLineTooLong    = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the line is longer than 16 MiB"}}` + "\n")
	rpcInvalidRequest = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: not a JSON-RPC 2.0 message"}}` + "\n")
)

// forwardMessages copies the lines of in that are JSON-RPC messages (or
// batches of them) to msgs, and answers every other non-blank line on
// errs. It returns nil at the end of in, or the error that stopped it.
func forwardMessages(in io.Reader, msgs io.Writer, errs io.Writer) error {
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, tooLong, err := readLine(r)
		if len(line) > 0 || tooLong {
			var werr error
			switch answer := lineError(line, tooLong); {
			case answer != nil:
				_, werr = errs.Write(answer)
			default:
				_, werr = msgs.Write(append(line, '\n'))
			}
			if werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// readLine reads one line of r without its end, trimmed of white space.
// A line longer than maxMCPLine is read to its end and dropped: tooLong
// says so.
func readLine(r *bufio.Reader) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > maxMCPLine+2 { // room for "\r\n"
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return bytes.TrimSpace(line), tooLong, err
		}
	}
}

// lineError returns the answer to a line that is not a JSON-RPC message or
// batch of messages, or nil for one that is.
func lineError(line []byte, tooLong bool) []byte {
	switch {
	case tooLong:
		return rpcLineTooLong
	case !json.Valid(line):
		return rpcParseError
	case line[0] == '[':
		var batch []json.RawMessage
		if json.Unmarshal(line, &batch) != nil || len(batch) == 0 {
			return rpcInvalidRequest
		}
		for _, m := range batch {
			if _, err := jsonrpc.DecodeMessage(m); err != nil {
				return rpcInvalidRequest
			}
		}
		return nil
	}
	if _, err := jsonrpc.DecodeMessage(line); err != nil {
		return rpcInvalidRequest
	}
	return nil
}
