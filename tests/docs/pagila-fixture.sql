-- A small database shaped as Pagila (docs/how-to/pagila.md walks the real one): its 15 tables with their columns,
-- keys and btree indexes, the partitioned payment with seven monthly partitions, the enum mpaa_rating, the domain
-- year, text[], tsvector and bytea columns, its views (customer_list with a column named "zip code") and the
-- materialized view rental_by_category left unpopulated with a unique index, as the dump leaves it. Rows are few and
-- made up, each table's the same on every load. tests/docs/pagila.test.ts loads it in place of pagila.sql.
create type public.mpaa_rating as enum ('G', 'PG', 'PG-13', 'R', 'NC-17');
create domain public.year as integer constraint year_check check (value >= 1901 and value <= 2155);

create table public.language (language_id integer primary key, name character(20) not null, last_update timestamptz not null default now());
create table public.category (category_id integer primary key, name text not null, last_update timestamptz not null default now());
create table public.country (country_id integer primary key, country text not null, last_update timestamptz not null default now());
create table public.city (city_id integer primary key, city text not null, country_id integer not null, last_update timestamptz not null default now());
create table public.address (
  address_id integer primary key, address text not null, address2 text, district text not null, city_id integer not null,
  postal_code text, phone text not null, last_update timestamptz not null default now()
);
create table public.actor (actor_id integer primary key, first_name text not null, last_name text not null, last_update timestamptz not null default now());
create table public.film (
  film_id integer primary key,
  title text not null,
  description text,
  release_year public.year,
  language_id integer not null,
  original_language_id integer,
  rental_duration smallint not null default 3,
  rental_rate numeric(4, 2) not null default 4.99,
  length smallint,
  replacement_cost numeric(5, 2) not null default 19.99,
  rating public.mpaa_rating default 'G',
  last_update timestamptz not null default now(),
  special_features text[],
  fulltext tsvector not null
);
create table public.film_actor (actor_id integer not null, film_id integer not null, last_update timestamptz not null default now(), primary key (actor_id, film_id));
create table public.film_category (film_id integer not null, category_id integer not null, last_update timestamptz not null default now(), primary key (film_id, category_id));
create table public.store (store_id integer primary key, manager_staff_id integer not null, address_id integer not null, last_update timestamptz not null default now());
create table public.staff (
  staff_id integer primary key, first_name text not null, last_name text not null, address_id integer not null, email text,
  store_id integer not null, active boolean not null default true, username text not null, password text,
  last_update timestamptz not null default now(), picture bytea
);
create table public.customer (
  customer_id integer primary key, store_id integer not null, first_name text not null, last_name text not null, email text,
  address_id integer not null, activebool boolean not null default true, create_date date not null default current_date,
  last_update timestamptz default now(), active integer
);
create table public.inventory (inventory_id integer primary key, film_id integer not null, store_id integer not null, last_update timestamptz not null default now());
create table public.rental (
  rental_id integer primary key, rental_date timestamptz not null, inventory_id integer not null, customer_id integer not null,
  return_date timestamptz, staff_id integer not null, last_update timestamptz not null default now()
);
create table public.payment (
  payment_id integer not null, customer_id integer not null, staff_id integer not null, rental_id integer not null,
  amount numeric(5, 2) not null, payment_date timestamptz not null, primary key (payment_date, payment_id)
) partition by range (payment_date);
create table public.payment_p2022_01 partition of public.payment for values from ('2022-01-01 00:00:00+00') to ('2022-02-01 00:00:00+00');
create table public.payment_p2022_02 partition of public.payment for values from ('2022-02-01 00:00:00+00') to ('2022-03-01 00:00:00+00');
create table public.payment_p2022_03 partition of public.payment for values from ('2022-03-01 00:00:00+00') to ('2022-04-01 00:00:00+00');
create table public.payment_p2022_04 partition of public.payment for values from ('2022-04-01 00:00:00+00') to ('2022-05-01 00:00:00+00');
create table public.payment_p2022_05 partition of public.payment for values from ('2022-05-01 00:00:00+00') to ('2022-06-01 00:00:00+00');
create table public.payment_p2022_06 partition of public.payment for values from ('2022-06-01 00:00:00+00') to ('2022-07-01 00:00:00+00');
create table public.payment_p2022_07 partition of public.payment for values from ('2022-07-01 00:00:00+00') to ('2022-08-01 00:00:00+00');

-- Pagila's btree indexes (and its gist one), by their names.
create index film_fulltext_idx on public.film using gist (fulltext);
create index idx_actor_last_name on public.actor (last_name);
create index idx_fk_address_id on public.customer (address_id);
create index idx_fk_city_id on public.address (city_id);
create index idx_fk_country_id on public.city (country_id);
create index idx_fk_film_id on public.film_actor (film_id);
create index idx_fk_inventory_id on public.rental (inventory_id);
create index idx_fk_language_id on public.film (language_id);
create index idx_fk_original_language_id on public.film (original_language_id);
create index idx_fk_store_id on public.customer (store_id);
create index idx_last_name on public.customer (last_name);
create index idx_store_id_film_id on public.inventory (store_id, film_id);
create index idx_title on public.film (title);
create unique index idx_unq_manager_staff_id on public.store (manager_staff_id);
create unique index idx_unq_rental_rental_date_inventory_id_customer_id on public.rental (rental_date, inventory_id, customer_id);
create index idx_fk_payment_p2022_01_customer_id on public.payment_p2022_01 (customer_id);
create index idx_fk_payment_p2022_01_staff_id on public.payment_p2022_01 (staff_id);

insert into public.language (language_id, name) values (1, 'English'), (2, 'Italian'), (3, 'Japanese'), (4, 'Mandarin'), (5, 'French'), (6, 'German');
insert into public.category (category_id, name)
  select n, (array['Action', 'Animation', 'Children', 'Classics', 'Comedy', 'Documentary', 'Drama', 'Family', 'Foreign', 'Games',
                   'Horror', 'Music', 'New', 'Sci-Fi', 'Sports', 'Travel'])[n]
  from generate_series(1, 16) n;
insert into public.country (country_id, country) values (1, 'Australia'), (2, 'Canada'), (3, 'Italy');
insert into public.city (city_id, city, country_id) values (1, 'Woodridge', 1), (2, 'Lethbridge', 2), (3, 'Roma', 3), (4, 'Milano', 3);
insert into public.address (address_id, address, district, city_id, postal_code, phone)
  select n, n || ' Main Street', 'District ' || n, 1 + n % 4, case when n % 5 = 0 then null else lpad((n * 37)::text, 5, '0') end, '555-' || n
  from generate_series(1, 30) n;
insert into public.actor (actor_id, first_name, last_name, last_update)
  select n, 'FIRST' || n, (array['GUINESS', 'WAHLBERG', 'CHASE', 'DAVIS', 'BERRY', 'WOOD', 'TORN'])[1 + n % 7], '2022-02-15 09:34:33+00'
  from generate_series(1, 20) n;
insert into public.film (film_id, title, description, release_year, language_id, rental_duration, rental_rate, length, replacement_cost, rating, last_update, special_features, fulltext)
  select n,
    case n when 1 then 'ACADEMY DINOSAUR' when 2 then 'ACE GOLDFINGER' else 'FILM ' || lpad(n::text, 3, '0') end,
    'A film about number ' || n,
    2006,
    1,
    3 + n % 5,
    (array[0.99, 2.99, 4.99])[1 + n % 3],
    case when n = 2 then 48 else 46 + (n * 7) % 140 end,
    9.99 + n % 21,
    (enum_range(null::public.mpaa_rating))[1 + n % 5],
    '2022-09-10 16:46:03.905795+00',
    case when n % 2 = 0 then array['Trailers', 'Deleted Scenes'] else array['Commentaries'] end,
    to_tsvector('english', 'film number ' || n)
  from generate_series(1, 30) n;
insert into public.film_actor (actor_id, film_id) select 1 + (n * 3) % 20, 1 + n % 28 from generate_series(0, 59) n on conflict do nothing;
insert into public.film_category (film_id, category_id) select n, 1 + n % 16 from generate_series(1, 30) n;
insert into public.staff (staff_id, first_name, last_name, address_id, email, store_id, username, password, picture) values
  (1, 'Mike', 'Hillyer', 3, 'mike@example.com', 1, 'Mike', '8cb2237d0679ca88db6464eac60da96345513964', '\x89504e47'),
  (2, 'Jon', 'Stephens', 4, 'jon@example.com', 2, 'Jon', '8cb2237d0679ca88db6464eac60da96345513964', null);
insert into public.store (store_id, manager_staff_id, address_id) values (1, 1, 1), (2, 2, 2);
insert into public.customer (customer_id, store_id, first_name, last_name, email, address_id, create_date, active)
  select n, 1 + n % 2, 'FIRST' || n, 'LAST' || lpad((n * 7 % 20)::text, 2, '0'), case when n % 6 = 0 then null else 'c' || n || '@example.com' end,
    5 + n, date '2022-02-14', 1
  from generate_series(1, 20) n;
insert into public.inventory (inventory_id, film_id, store_id) select n, 1 + n % 30, 1 + n % 2 from generate_series(1, 40) n;
insert into public.rental (rental_id, rental_date, inventory_id, customer_id, return_date, staff_id)
  select n, timestamptz '2022-05-24 21:53:30+00' + n * interval '7 hours', 1 + n % 40, 1 + n % 20,
    case when n % 9 = 0 then null else timestamptz '2022-05-26 21:04:30+00' + n * interval '7 hours' end, 1 + n % 2
  from generate_series(1, 120) n;
insert into public.payment (payment_id, customer_id, staff_id, rental_id, amount, payment_date)
  select 16000 + n, 1 + n % 20, 1 + n % 2, 1 + n % 120, (array[0.99, 2.99, 4.99, 7.99])[1 + n % 4],
    timestamptz '2022-01-23 13:03:52.212496+00' + n * interval '1 day 13 hours 7 minutes'
  from generate_series(1, 120) n;

-- The views, as Pagila defines them (string_agg where Pagila has its own group_concat).
create view public.actor_info as
  select a.actor_id, a.first_name, a.last_name, string_agg(distinct c.name, ', ') as film_info
  from public.actor a
    left join public.film_actor fa on a.actor_id = fa.actor_id
    left join public.film_category fc on fa.film_id = fc.film_id
    left join public.category c on fc.category_id = c.category_id
  group by a.actor_id, a.first_name, a.last_name;
create view public.customer_list as
  select cu.customer_id as id, cu.first_name || ' ' || cu.last_name as name, a.address, a.postal_code as "zip code", a.phone,
    city.city, country.country, case when cu.activebool then 'active' else '' end as notes, cu.store_id as sid
  from public.customer cu
    join public.address a on cu.address_id = a.address_id
    join public.city on a.city_id = city.city_id
    join public.country on city.country_id = country.country_id;
create view public.film_list as
  select film.film_id as fid, film.title, film.description, category.name as category, film.rental_rate as price, film.length,
    film.rating, string_agg(actor.first_name || ' ' || actor.last_name, ', ') as actors
  from public.category
    left join public.film_category on category.category_id = film_category.category_id
    left join public.film on film_category.film_id = film.film_id
    join public.film_actor on film.film_id = film_actor.film_id
    join public.actor on film_actor.actor_id = actor.actor_id
  group by film.film_id, film.title, film.description, category.name, film.rental_rate, film.length, film.rating;
create view public.nicer_but_slower_film_list as select * from public.film_list;
create materialized view public.rental_by_category as
  select c.name as category, sum(p.amount) as total_sales
  from public.payment p
    join public.rental r on p.rental_id = r.rental_id
    join public.inventory i on r.inventory_id = i.inventory_id
    join public.film f on i.film_id = f.film_id
    join public.film_category fc on f.film_id = fc.film_id
    join public.category c on fc.category_id = c.category_id
  group by c.name
  order by sum(p.amount) desc
  with no data;
create unique index rental_category on public.rental_by_category (category);
create view public.sales_by_film_category as
  select c.name as category, sum(p.amount) as total_sales
  from public.payment p
    join public.rental r on p.rental_id = r.rental_id
    join public.inventory i on r.inventory_id = i.inventory_id
    join public.film f on i.film_id = f.film_id
    join public.film_category fc on f.film_id = fc.film_id
    join public.category c on fc.category_id = c.category_id
  group by c.name
  order by sum(p.amount) desc;
create view public.sales_by_store as
  select c.city || ',' || cy.country as store, m.first_name || ' ' || m.last_name as manager, sum(p.amount) as total_sales
  from public.payment p
    join public.rental r on p.rental_id = r.rental_id
    join public.inventory i on r.inventory_id = i.inventory_id
    join public.store s on i.store_id = s.store_id
    join public.address a on s.address_id = a.address_id
    join public.city c on a.city_id = c.city_id
    join public.country cy on c.country_id = cy.country_id
    join public.staff m on s.manager_staff_id = m.staff_id
  group by cy.country, c.city, s.store_id, m.first_name, m.last_name
  order by cy.country, c.city;
create view public.staff_list as
  select s.staff_id as id, s.first_name || ' ' || s.last_name as name, a.address, a.postal_code as "zip code", a.phone, city.city,
    country.country, s.store_id as sid
  from public.staff s
    join public.address a on s.address_id = a.address_id
    join public.city on a.city_id = city.city_id
    join public.country on city.country_id = country.country_id;
analyze;
