package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
)

// A donor's browser is bound to its session by a cookie, so continuing a
// flow in a later run needs that cookie. LoadJar and SaveJar keep it in a
// file (mode 0600: it lets whoever holds it act as the donor until the
// session expires).

type savedJar struct {
	URL     string        `json:"url"`
	Cookies []savedCookie `json:"cookies"`
}

type savedCookie struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// LoadJar returns a cookie jar holding the cookies saved at path for the
// flow at flowURL; a missing file is a fresh jar.
func LoadJar(path, flowURL string) (http.CookieJar, error) {
	jar, _ := cookiejar.New(nil)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return jar, nil
	}
	if err != nil {
		return nil, err
	}
	var saved savedJar
	if err := json.Unmarshal(data, &saved); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if saved.URL != flowURL {
		return nil, fmt.Errorf("%s keeps the browser of another flow", path)
	}
	u, err := url.Parse(flowURL)
	if err != nil {
		return nil, err
	}
	cookies := make([]*http.Cookie, len(saved.Cookies))
	for i, c := range saved.Cookies {
		cookies[i] = &http.Cookie{Name: c.Name, Value: c.Value, Path: u.Path}
	}
	jar.SetCookies(u, cookies)
	return jar, nil
}

// SaveJar writes the jar's cookies for the flow at flowURL to path.
func SaveJar(path, flowURL string, jar http.CookieJar) error {
	u, err := url.Parse(flowURL)
	if err != nil {
		return err
	}
	saved := savedJar{URL: flowURL}
	for _, c := range jar.Cookies(u) {
		saved.Cookies = append(saved.Cookies, savedCookie{Name: c.Name, Value: c.Value})
	}
	data, err := json.Marshal(saved)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}
