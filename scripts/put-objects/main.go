// Command put-objects fills an S3 bucket or an Azure Blob container with
// many small objects in ImageNet layout (train/CLASS/CLASS_N.JPEG), in
// parallel, and times stallfs's own Walk over them: the listing benchmark
// of scripts/bench-list.sh.
//
//	put-objects -store s3 -endpoint http://127.0.0.1:PORT -bucket bench put
//	put-objects -store s3 -endpoint http://127.0.0.1:PORT -bucket bench walk
//	put-objects -store azure -endpoint http://127.0.0.1:PORT/ACCOUNT -account ACCOUNT -bucket bench put
//	put-objects -store azure -endpoint http://127.0.0.1:PORT/ACCOUNT -bucket bench sas
//	put-objects -endpoint http://127.0.0.1:PORT -listen 127.0.0.1:PORT2 -rtt 20ms proxy
//
// S3 credentials come from the SDK's default chain (AWS_ACCESS_KEY_ID,
// ...), the Azure account key from AZURE_STORAGE_ACCESS_KEY. put creates
// the bucket or container when missing and uploads -objects objects of
// -size bytes, -per-class in each class prefix. walk runs the backend's
// Walk -runs times for each -conc value (1: one flat listing) and prints
// one tab-separated line per run: store, list concurrency, objects,
// directories, seconds, objects/s. sas prints a read and list SAS URL of
// the container, valid for a day (rclone's Azure remote needs one to reach
// an emulator on another port than 10000). proxy serves -listen and
// forwards every request to -endpoint's host after waiting -rtt: a store
// on 127.0.0.1 that answers as late as a remote one would.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/sync/errgroup"

	"github.com/stallfs/stallfs/backend"
	"github.com/stallfs/stallfs/backend/azblob"
	"github.com/stallfs/stallfs/backend/s3"
)

type options struct {
	store, endpoint, bucket, account  string
	objects, perClass, size, parallel int
	conc                              string
	runs                              int
	listen                            string
	rtt                               time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.store, "store", "s3", "s3 or azure")
	flag.StringVar(&o.endpoint, "endpoint", "", "S3 endpoint URL, or Azure blob service URL (http://127.0.0.1:PORT/ACCOUNT)")
	flag.StringVar(&o.bucket, "bucket", "bench", "bucket or container")
	flag.StringVar(&o.account, "account", "devstoreaccount1", "Azure storage account")
	flag.IntVar(&o.objects, "objects", 200_000, "objects to upload")
	flag.IntVar(&o.perClass, "per-class", 1281, "objects per class prefix below train/ (ImageNet's average)")
	flag.IntVar(&o.size, "size", 0, "bytes per object (a listing reads none)")
	flag.IntVar(&o.parallel, "parallel", 64, "uploads in flight")
	flag.StringVar(&o.conc, "conc", "1,16,32", "walk: comma-separated list concurrencies (1: flat)")
	flag.IntVar(&o.runs, "runs", 2, "walk: runs per concurrency")
	flag.StringVar(&o.listen, "listen", "127.0.0.1:0", "proxy: address to serve")
	flag.DurationVar(&o.rtt, "rtt", 20*time.Millisecond, "proxy: delay added to every request")
	flag.Parse()
	if flag.NArg() != 1 || o.endpoint == "" || o.store != "s3" && o.store != "azure" || o.perClass < 1 {
		fmt.Fprintln(os.Stderr, "usage: put-objects -store s3|azure -endpoint URL [flags] put|walk|sas|proxy")
		os.Exit(2)
	}
	ctx := context.Background()
	var err error
	switch flag.Arg(0) {
	case "put":
		err = put(ctx, o)
	case "walk":
		err = walk(ctx, o)
	case "sas":
		err = sasURL(o)
	case "proxy":
		err = proxy(o)
	default:
		err = fmt.Errorf("unknown command %q", flag.Arg(0))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "put-objects:", err)
		os.Exit(1)
	}
}

// name is the key of object i: classes get consecutive runs of objects,
// as ImageNet's train/WNID/WNID_N.JPEG.
func name(o options, i int) string {
	class := fmt.Sprintf("n%08d", 1_000_000+i/o.perClass)
	return fmt.Sprintf("train/%s/%s_%d.JPEG", class, class, i%o.perClass)
}

// uploader stores one object.
type uploader func(ctx context.Context, key string, data []byte) error

func put(ctx context.Context, o options) error {
	up, err := newUploader(ctx, o)
	if err != nil {
		return err
	}
	start := time.Now()
	var done atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(o.parallel)
	for i := range o.objects {
		key := name(o, i)
		g.Go(func() error {
			data := bytes.Repeat([]byte{byte(i)}, o.size)
			if err := up(gctx, key, data); err != nil {
				return fmt.Errorf("put %s: %w", key, err)
			}
			if n := done.Add(1); n%20_000 == 0 {
				fmt.Fprintf(os.Stderr, "put-objects: %d/%d objects, %.0f/s\n", n, o.objects, float64(n)/time.Since(start).Seconds())
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	took := time.Since(start).Seconds()
	fmt.Printf("uploaded %d objects of %d bytes to %s in %.1f s (%.0f objects/s)\n", o.objects, o.size, o.store, took, float64(o.objects)/took)
	return nil
}

func azureContainer(o options) (*container.Client, error) {
	cred, err := container.NewSharedKeyCredential(o.account, os.Getenv("AZURE_STORAGE_ACCESS_KEY"))
	if err != nil {
		return nil, err
	}
	return container.NewClientWithSharedKeyCredential(strings.TrimRight(o.endpoint, "/")+"/"+o.bucket, cred, nil)
}

func sasURL(o options) error {
	if o.store != "azure" {
		return errors.New("sas: only for -store azure")
	}
	c, err := azureContainer(o)
	if err != nil {
		return err
	}
	u, err := c.GetSASURL(sas.ContainerPermissions{Read: true, List: true}, time.Now().Add(24*time.Hour), nil)
	if err != nil {
		return err
	}
	fmt.Println(u)
	return nil
}

func newUploader(ctx context.Context, o options) (uploader, error) {
	if o.store == "azure" {
		c, err := azureContainer(o)
		if err != nil {
			return nil, err
		}
		if _, err := c.Create(ctx, nil); err != nil && !bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
			return nil, err
		}
		return func(ctx context.Context, key string, data []byte) error {
			_, err := c.NewBlockBlobClient(key).UploadBuffer(ctx, data, nil)
			return err
		}, nil
	}
	cfg, err := config.LoadDefaultConfig(ctx,
		config.WithRegion("us-east-1"),
		config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired))
	if err != nil {
		return nil, err
	}
	c := awss3.NewFromConfig(cfg, func(so *awss3.Options) {
		so.BaseEndpoint = aws.String(o.endpoint)
		so.UsePathStyle = true
	})
	if _, err := c.HeadBucket(ctx, &awss3.HeadBucketInput{Bucket: aws.String(o.bucket)}); err != nil {
		if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(o.bucket)}); err != nil {
			return nil, fmt.Errorf("create bucket %s: %w", o.bucket, err)
		}
	}
	return func(ctx context.Context, key string, data []byte) error {
		_, err := c.PutObject(ctx, &awss3.PutObjectInput{
			Bucket: aws.String(o.bucket), Key: aws.String(key),
			Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
		})
		return err
	}, nil
}

func walk(ctx context.Context, o options) error {
	for _, f := range strings.Split(o.conc, ",") {
		conc, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || conc < 1 {
			return fmt.Errorf("bad -conc value %q", f)
		}
		for range o.runs {
			b, err := open(ctx, o, conc)
			if err != nil {
				return err
			}
			var files, dirs int
			start := time.Now()
			err = b.(backend.Walker).Walk(ctx, "", func(_ string, e backend.Entry) error {
				if e.IsDir() {
					dirs++
				} else {
					files++
				}
				return nil
			})
			took := time.Since(start).Seconds()
			b.Close()
			if err != nil {
				return fmt.Errorf("walk with list concurrency %d: %w", conc, err)
			}
			fmt.Printf("%s\t%d\t%d\t%d\t%.3f\t%.0f\n", o.store, conc, files, dirs, took, float64(files)/took)
		}
	}
	return nil
}

// open returns the stallfs backend over the store.
func open(ctx context.Context, o options, conc int) (backend.Backend, error) {
	if o.store == "azure" {
		key := os.Getenv("AZURE_STORAGE_ACCESS_KEY")
		if key == "" {
			return nil, errors.New("AZURE_STORAGE_ACCESS_KEY is not set")
		}
		return azblob.New(ctx, azblob.Options{
			Account: o.account, Container: o.bucket, Endpoint: o.endpoint,
			Credential: azblob.Credential{AccountKey: key}, ListConcurrency: conc,
		})
	}
	return s3.New(ctx, s3.Options{
		Bucket: o.bucket, Endpoint: o.endpoint, PathStyle: true, Region: "us-east-1", ListConcurrency: conc,
	})
}

// proxy forwards every request to o.endpoint's host, o.rtt late, until it
// is killed. The Host header is kept, so signatures made for the proxy's
// address stay valid.
func proxy(o options) error {
	u, err := url.Parse(o.endpoint)
	if err != nil {
		return err
	}
	u.Path = ""
	rp := httputil.NewSingleHostReverseProxy(u)
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr())
	return http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(o.rtt):
		case <-r.Context().Done():
			return
		}
		rp.ServeHTTP(w, r)
	}))
}
