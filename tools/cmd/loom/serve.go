package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/loomrt/loom/go/serve"
)

func init() {
	register("serve", "serve models over the Open Inference Protocol (KServe v2 / Triton): HTTP and gRPC", serveMain)
}

// serveSignals are the signals that stop `loom serve` gracefully; tests replace them.
var serveSignals = []os.Signal{syscall.SIGTERM, os.Interrupt}

// serveMain implements `loom serve`: it loads the models, listens on both ports, prints one
// ready line on stdout and serves until SIGTERM or SIGINT, then shuts down gracefully.
func serveMain(args []string, stdout, stderr io.Writer) int {
	c := newCommand("serve", "serve [--model-repository DIR | --model-dir DIR --model-name NAME] [--http-port N] [--grpc-port N] [flags]",
		"Serves ONNX models over the Open Inference Protocol (KServe v2, as Triton speaks it): REST on\n"+
			"--http-port, gRPC (inference.GRPCInferenceService) on --grpc-port, Prometheus metrics on\n"+
			"GET /metrics. --model-repository DIR serves DIR/MODEL/VERSION/model.onnx (with an optional\n"+
			"DIR/MODEL/config.json: provider, threads, dynamic batching); --model-dir DIR serves\n"+
			"DIR/model.onnx as --model-name (as KServe mounts a model at /mnt/models). With neither it\n"+
			"serves the demo MNIST model built into this binary as \"mnist\" version 1.\n\n"+
			"Once both listeners are up it prints one line on stdout:\n"+
			"  loom serve: ready http=HOST:PORT grpc=HOST:PORT\n"+
			"SIGTERM or SIGINT stops it gracefully: readiness turns false, the listeners close, requests\n"+
			"in flight are answered, then it exits 0. docs/serving.md has the details.", stdout, stderr)
	repo := c.String("model-repository", "", "serve the models of this repository directory")
	dir := c.String("model-dir", "", "serve DIR/model.onnx (a single-model directory) as --model-name")
	name := c.String("model-name", "", "the model name for --model-dir (default: the directory's name)")
	host := c.String("host", "", "the address to listen on (default: all interfaces)")
	httpPort := c.Int("http-port", 8000, "the REST port (0: a free port)")
	grpcPort := c.Int("grpc-port", 8001, "the gRPC port (0: a free port)")
	maxBody := c.Int64("max-body-bytes", serve.DefaultMaxBodyBytes, "the largest request body (REST) or message (gRPC) accepted; larger ones get 413 / RESOURCE_EXHAUSTED")
	provider := c.String("ep", "host", "execution provider of models without a config.json: host, cuda or auto")
	threads := c.Int("threads", 0, "host worker threads of models without a config.json (0: the cores shared among a model's instances)")
	shutdownDelay := c.Duration("shutdown-delay", 0, "how long readiness is false before the listeners close on SIGTERM")
	shutdownTimeout := c.Duration("shutdown-timeout", 30*time.Second, "how long SIGTERM waits for requests in flight")
	pos, rc := c.parse(args)
	if rc >= 0 {
		return rc
	}
	if len(pos) != 0 {
		return c.usageError("takes no arguments, got %q", pos)
	}
	switch {
	case *repo != "" && *dir != "":
		return c.badArgument("--model-repository and --model-dir are exclusive")
	case *name != "" && *dir == "":
		return c.badArgument("--model-name names the model of --model-dir")
	case *httpPort < 0 || *httpPort > 65535:
		return c.badArgument("--http-port %d: want 0-65535", *httpPort)
	case *grpcPort < 0 || *grpcPort > 65535:
		return c.badArgument("--grpc-port %d: want 0-65535", *grpcPort)
	case *maxBody <= 0:
		return c.badArgument("--max-body-bytes %d: want a positive size", *maxBody)
	case *threads < 0:
		return c.badArgument("--threads %d: want 0 or more", *threads)
	case *shutdownDelay < 0 || *shutdownTimeout <= 0:
		return c.badArgument("--shutdown-delay must not be negative and --shutdown-timeout must be positive")
	}
	if err := checkProvider(*provider); err != nil {
		return c.badArgument("%v", err)
	}
	for _, d := range []struct{ flag, path string }{{"--model-repository", *repo}, {"--model-dir", *dir}} {
		if d.path == "" {
			continue
		}
		if st, err := os.Stat(d.path); err != nil || !st.IsDir() {
			wd, _ := os.Getwd()
			return c.badArgument("%s %s: not a directory (relative paths start at %s)", d.flag, d.path, wd)
		}
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	opts := []serve.Option{
		serve.WithMaxBodyBytes(*maxBody), serve.WithLogger(logger), serve.WithShutdownDelay(*shutdownDelay),
		serve.WithServerVersion(buildVersion().version),
		serve.WithDefaultModelConfig(serve.ModelConfig{Provider: *provider, IntraOpThreads: *threads}),
	}
	switch {
	case *repo != "":
		opts = append(opts, serve.WithModelRepository(*repo))
	case *dir != "":
		if *name == "" {
			abs, err := filepath.Abs(*dir)
			if err != nil {
				return c.badArgument("--model-dir %s: %v", *dir, err)
			}
			*name = filepath.Base(abs)
		}
		opts = append(opts, serve.WithModelDir(*dir, *name))
	default:
		model, err := demoData.ReadFile("demodata/mnist.onnx")
		if err != nil {
			return c.fail("%v", err)
		}
		opts = append(opts, serve.WithModelBytes("mnist", "1", model, serve.ModelConfig{}))
	}
	// Signals are caught from here on, so one during the model load stops the server as soon
	// as it is up rather than killing the process.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, serveSignals...)
	defer signal.Stop(sigs)
	srv, err := serve.New(opts...)
	if err != nil {
		return c.fail("%v", err)
	}
	httpL, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*httpPort)))
	if err != nil {
		srv.Shutdown(context.Background()) //nolint:errcheck // the listen error is the one to report
		return c.fail("--http-port: %v", err)
	}
	grpcL, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*grpcPort)))
	if err != nil {
		httpL.Close()
		srv.Shutdown(context.Background()) //nolint:errcheck
		return c.fail("--grpc-port: %v", err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(httpL, grpcL) }()
	fmt.Fprintf(stdout, "loom serve: ready http=%s grpc=%s\n", httpL.Addr(), grpcL.Addr())
	select {
	case err := <-served:
		if err != nil {
			return c.fail("%v", err)
		}
		return exitOK
	case sig := <-sigs:
		logger.Info("loom serve: shutting down", "signal", sig.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), *shutdownDelay+*shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		<-served
		return c.fail("shutdown: %v", err)
	}
	if err := <-served; err != nil {
		return c.fail("%v", err)
	}
	return exitOK
}
