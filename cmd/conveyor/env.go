package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/spf13/cobra"

	"github.com/conveyor/conveyor/internal/httpapi"
)

// localEnv is the environment `make run` starts; it needs no config entry.
const localEnv = "local"

// envConfig is one environment of the config file.
type envConfig struct {
	// URL is the API's base URL.
	URL string `json:"url"`
	// Exactly one token source: the token itself, the environment
	// variable that holds it, or a file that holds it.
	Token     string `json:"token,omitempty"`
	TokenEnv  string `json:"tokenEnv,omitempty"`
	TokenFile string `json:"tokenFile,omitempty"`
	// JWTSecret names the Secrets Manager secret (name or ARN) holding
	// the environment's HS256 key, for `conveyor token --env`; default
	// the CDK stack's name for a known environment (conveyor-<env>/jwt).
	JWTSecret string `json:"jwtSecret,omitempty"`
	// StreamURL is the event streams' origin (the stack output
	// StreamUrl, a Lambda function URL): `events tail` calls it, not url.
	StreamURL string `json:"streamUrl,omitempty"`
	// Region and Profile are the AWS region and the shared-config profile
	// the CLI reads the environment's AWS resources with (`token --env`);
	// empty: the usual chain (AWS_REGION, AWS_PROFILE, the profile's
	// region).
	Region  string `json:"region,omitempty"`
	Profile string `json:"profile,omitempty"`
}

// awsOptions are the SDK options that pick ec's region and profile.
func (ec envConfig) awsOptions() []func(*config.LoadOptions) error {
	var opts []func(*config.LoadOptions) error
	if ec.Profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(ec.Profile))
	}
	if ec.Region != "" {
		opts = append(opts, config.WithRegion(ec.Region))
	}
	return opts
}

type configFile struct {
	Environments map[string]envConfig `json:"environments"`
}

// target is an environment ready to call, or the reason it is not.
type target struct {
	name, url, token string
	// streamURL is the origin of the event streams when it is not url's
	// (the local stack in binary mode; CONVEYOR_STREAM_URL).
	streamURL string
	// envFile is the local stack's env file the url came from.
	envFile string
	// secret is the local stack's HS256 key: the CLI mints tokens with it.
	secret []byte
	err    error
}

// common are the flags every remote command takes.
type common struct {
	env     string
	config  string
	envFile string
	// as is the user the local stack's token names (commands that act as
	// a user: jobs submit, events tail, schedules, webhooks).
	as string
}

// localUser is who the CLI and the dashboard act as on the local stack
// unless told otherwise (--as): one user, so that what one submits the
// other shows.
const localUser = "local-admin"

// addCommon adds the flags of every command that calls an API to cmd.
func (c *cli) addCommon(cmd *cobra.Command, envHelp string) *common {
	o := &common{}
	fs := cmd.Flags()
	fs.StringVar(&o.env, "env", "", envHelp)
	fs.StringVar(&o.config, "config", "", "environments file (default ~/.config/conveyor/environments.json)")
	fs.StringVar(&o.envFile, "env-file", ".local/env", "the local stack's environment, written by make run")
	_ = cmd.RegisterFlagCompletionFunc("env", c.envNames(o))
	_ = cmd.MarkFlagFilename("config", "json")
	return o
}

func (c *cli) configPath(o *common) (string, bool) {
	if o.config != "" {
		return o.config, true
	}
	if x := c.getenv("XDG_CONFIG_HOME"); x != "" {
		return filepath.Join(x, "conveyor", "environments.json"), false
	}
	return filepath.Join(c.getenv("HOME"), ".config", "conveyor", "environments.json"), false
}

func (c *cli) loadConfig(o *common) (configFile, error) {
	path, explicit := c.configPath(o)
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && !explicit {
		return configFile{}, nil
	}
	if err != nil {
		return configFile{}, fmt.Errorf("reading the environments file: %w", err)
	}
	var cf configFile
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cf); err != nil {
		return configFile{}, fmt.Errorf("%s: %w", path, err)
	}
	return cf, nil
}

// targets resolves the environments named by --env (default: every
// configured one, or local when none is). A name that is neither
// configured nor local is a usage error; an environment whose token cannot
// be had becomes a target with an error, so the others still run.
func (c *cli) targets(o *common) ([]target, error) {
	cf, err := c.loadConfig(o)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, n := range strings.Split(o.env, ",") {
		if n = strings.TrimSpace(n); n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		for n := range cf.Environments {
			names = append(names, n)
		}
		if len(names) == 0 {
			names = []string{localEnv}
		}
	}
	slices.Sort(names)
	var out []target
	for _, n := range names {
		ec, ok := cf.Environments[n]
		switch {
		case ok:
			out = append(out, c.resolve(n, ec))
		case n == localEnv:
			out = append(out, c.local(o))
		default:
			known := []string{localEnv}
			for k := range cf.Environments {
				known = append(known, k)
			}
			slices.Sort(known)
			return nil, usagef("unknown environment %q (known: %s)", n, strings.Join(slices.Compact(known), ", "))
		}
	}
	return out, nil
}

// one resolves exactly one environment for an action.
func (c *cli) one(o *common) (target, error) {
	if strings.Contains(o.env, ",") {
		return target{}, usagef("an action runs in one environment: name it with --env")
	}
	if o.env == "" {
		cf, err := c.loadConfig(o)
		if err != nil {
			return target{}, err
		}
		switch len(cf.Environments) {
		case 0:
			o.env = localEnv
		case 1:
			for n := range cf.Environments {
				o.env = n
			}
		default:
			return target{}, usagef("an action runs in one environment: name it with --env")
		}
	}
	ts, err := c.targets(o)
	if err != nil {
		return target{}, err
	}
	if ts[0].err != nil {
		return target{}, fmt.Errorf("%s: %w", ts[0].name, ts[0].err)
	}
	return ts[0], nil
}

func (c *cli) resolve(name string, ec envConfig) target {
	t := target{name: name, url: strings.TrimRight(ec.URL, "/"), streamURL: strings.TrimRight(ec.StreamURL, "/")}
	sources := 0
	for _, s := range []string{ec.Token, ec.TokenEnv, ec.TokenFile} {
		if s != "" {
			sources++
		}
	}
	switch {
	case t.url == "":
		t.err = errors.New("no url configured")
	case sources != 1:
		t.err = errors.New("configure exactly one of token, tokenEnv, tokenFile")
	case ec.Token != "":
		t.token = ec.Token
	case ec.TokenEnv != "":
		if t.token = strings.TrimSpace(c.getenv(ec.TokenEnv)); t.token == "" {
			t.err = fmt.Errorf("the variable %s holding the token is not set", ec.TokenEnv)
		}
	default:
		path := ec.TokenFile
		if rest, ok := strings.CutPrefix(path, "~/"); ok {
			path = filepath.Join(c.getenv("HOME"), rest)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.err = fmt.Errorf("reading the token file: %w", err)
		} else if t.token = strings.TrimSpace(string(raw)); t.token == "" {
			t.err = fmt.Errorf("the token file %s is empty", ec.TokenFile)
		}
	}
	return t
}

// local reads the local stack's URL and secret (the environment first,
// then .local/env) and mints a short-lived admin token.
func (c *cli) local(o *common) target {
	t := target{name: localEnv}
	file := readEnvFile(o.envFile)
	get := func(k string) string {
		if v := c.getenv(k); v != "" {
			return v
		}
		return file[k]
	}
	t.url = strings.TrimRight(get("CONVEYOR_API_URL"), "/")
	t.streamURL = strings.TrimRight(get("CONVEYOR_STREAM_URL"), "/")
	if len(file) > 0 {
		t.envFile = o.envFile
	}
	secret := get("CONVEYOR_JWT_SECRET")
	if t.url == "" || secret == "" {
		msg := fmt.Sprintf("no local stack: %s does not exist; start one with `make run` (it writes .local/env), or pass --env-file", o.envFile)
		if others := otherEnvFiles(o.envFile); len(others) > 0 {
			msg += " (other stacks wrote " + strings.Join(others, ", ") + ")"
		}
		t.err = errors.New(msg)
		return t
	}
	t.secret = []byte(secret)
	sub := o.as
	if sub == "" {
		sub = localUser
	}
	tok, err := httpapi.Mint([]byte(secret), httpapi.Claims{Subject: sub, Role: httpapi.RoleAdmin, Plan: "pro", ExpiresAt: c.now().Add(time.Hour)})
	if err != nil {
		t.err = err
	}
	t.token = tok
	return t
}

// readEnvFile reads `export K='v'` lines.
func readEnvFile(path string) map[string]string {
	m := map[string]string{}
	f, err := os.Open(path)
	if err != nil {
		return m
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimPrefix(strings.TrimSpace(sc.Text()), "export ")
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		m[k] = strings.ReplaceAll(strings.Trim(v, "'"), `'\''`, "'")
	}
	return m
}
