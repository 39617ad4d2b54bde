package serve

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"

	"github.com/loomrt/loom/go/session"
)

// A request's W3C traceparent (HTTP header or gRPC metadata) becomes the parent of the server's
// span, whose child is the session's loom.Run span.
func TestTraceparentPropagates(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background()) //nolint:errcheck
	ts := startServer(t, WithModelBytes("mnist", "1", mnistBytes(t), ModelConfig{}), WithTracerProvider(tp))
	rng := newRand(t)
	x := mnistInput(rng)
	for i, traceID := range []string{"4bf92f3577b34da6a3ce929d0e0e4736", "0af7651916cd43dd8448eb211c80319c"} {
		parent := "00f067aa0ba902b7"
		tp := "00-" + traceID + "-" + parent + "-01"
		if i == 0 {
			body := map[string]any{"inputs": []any{jsonInput(mnistIn, x)}}
			hr, err := http.NewRequest(http.MethodPost, ts.url+"/v2/models/mnist/infer", jsonBody(t, body))
			require.NoError(t, err)
			hr.Header.Set("traceparent", tp)
			resp, err := http.DefaultClient.Do(hr)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
		} else {
			ctx := metadata.AppendToOutgoingContext(context.Background(), "traceparent", tp)
			_, err := grpcInfer(ctx, ts.client, "mnist", session.NamedTensor{Name: mnistIn, Tensor: x})
			require.NoError(t, err)
		}
		var server, run sdktrace.ReadOnlySpan
		for _, sp := range rec.Ended() {
			if sp.SpanContext().TraceID().String() != traceID {
				continue
			}
			switch sp.Name() {
			case "ModelInfer":
				server = sp
			case "loom.Run":
				run = sp
			}
		}
		require.NotNil(t, server, "the server span of trace %s", traceID)
		require.NotNil(t, run, "the session's run span of trace %s", traceID)
		assert.Equal(t, trace.SpanKindServer, server.SpanKind())
		assert.Equal(t, parent, server.Parent().SpanID().String())
		assert.True(t, server.Parent().IsRemote())
		assert.Equal(t, server.SpanContext().SpanID(), run.Parent().SpanID())
	}
}
